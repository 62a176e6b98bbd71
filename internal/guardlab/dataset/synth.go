package dataset

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Synthetic benign documents. The allowed training data has almost no
// tables, source code or tool output, yet a gateway reads such text all
// day (retrieved documents, code answers, API results), and a classifier
// that has never seen them flags them for their odd shape. These
// generators write ordinary documents of those kinds from word lists
// written for this project (general knowledge of what tables, code and
// logs look like; nothing is taken from any dataset). They are
// deterministic in their seed.

var (
	synFirst  = []string{"Anna", "Ben", "Carlos", "Dana", "Elif", "Femi", "Grace", "Hiro", "Ines", "Jonas", "Kofi", "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wei", "Yusuf", "Zoe"}
	synLast   = []string{"Smith", "Garcia", "Okafor", "Tanaka", "Novak", "Silva", "Larsen", "Khan", "Dubois", "Rossi", "Müller", "Kowalski", "Nguyen", "Haddad", "Moreau", "Fischer", "Costa", "Ivanova", "Brown", "Ali"}
	synPlace  = []string{"Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Krakow", "Toronto", "Adelaide", "Porto", "Ghent", "Tampere", "Cork", "Valencia", "Bergen", "Leeds", "Austin", "Denver", "Hobart", "Quito", "Tbilisi"}
	synTeam   = []string{"Rovers", "United", "Athletic", "City", "Wanderers", "Rangers", "Albion", "Dynamo", "Sporting", "Olympic"}
	synThing  = []string{"laptop", "monitor", "keyboard", "desk lamp", "chair", "printer", "router", "headset", "webcam", "docking station", "notebook", "stapler", "projector", "phone case", "backpack"}
	synTopic  = []string{"budget", "roadmap", "migration", "onboarding", "release", "audit", "inventory", "survey", "workshop", "renovation", "harvest", "election", "tournament", "exhibition", "festival"}
	synVerb   = []string{"load", "parse", "save", "fetch", "update", "render", "sort", "merge", "filter", "validate", "encode", "split", "count", "format", "resize"}
	synNoun   = []string{"user", "order", "config", "record", "item", "file", "image", "token", "message", "report", "row", "entry", "event", "page", "account"}
	synStatus = []string{"ok", "pending", "shipped", "failed", "cancelled", "active", "closed", "draft", "approved", "queued"}
	synRole   = []string{"Lead", "Supporting", "Guest", "Narrator", "Cameo", "Himself", "Herself", "Voice"}
	synLevel  = []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	synMonth  = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

// title upper-cases the first letter of an ASCII word.
func title(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func synName(r *rand.Rand) string { return pick(r, synFirst) + " " + pick(r, synLast) }

// synTable writes a small table in one of the usual text layouts.
func synTable(r *rand.Rand) string {
	type shape struct {
		title string
		cols  []string
		cell  func(c int) string
	}
	year := func() string { return fmt.Sprint(1950 + r.IntN(75)) }
	shapes := []shape{
		{"Season results", []string{"Season", "Team", "Played", "Won", "Lost", "Points"}, func(c int) string {
			switch c {
			case 0:
				return year()
			case 1:
				return pick(r, synPlace) + " " + pick(r, synTeam)
			default:
				return fmt.Sprint(r.IntN(40))
			}
		}},
		{"Filmography", []string{"Year", "Title", "Role", "Notes"}, func(c int) string {
			switch c {
			case 0:
				return year()
			case 1:
				return "The " + title(pick(r, synTopic)) + " of " + pick(r, synPlace)
			case 2:
				return pick(r, synRole)
			default:
				return pick(r, []string{"", "TV film", "Nominated", "Uncredited", "Also producer", "Short"})
			}
		}},
		{"Election results", []string{"Candidate", "Party", "Votes", "%"}, func(c int) string {
			switch c {
			case 0:
				return synName(r)
			case 1:
				return pick(r, []string{"Labour", "Liberal", "Green", "Conservative", "Independent", "Social Democrats"})
			case 2:
				return fmt.Sprint(1000 + r.IntN(90000))
			default:
				return fmt.Sprintf("%.1f", r.Float64()*60)
			}
		}},
		{"Inventory", []string{"SKU", "Item", "Qty", "Unit price", "Status"}, func(c int) string {
			switch c {
			case 0:
				return fmt.Sprintf("SKU-%05d", r.IntN(100000))
			case 1:
				return pick(r, synThing)
			case 2:
				return fmt.Sprint(r.IntN(500))
			case 3:
				return fmt.Sprintf("%.2f", 2+r.Float64()*400)
			default:
				return pick(r, synStatus)
			}
		}},
		{"Population by city", []string{"Rank", "City", "Population", "Area (km2)", "Founded"}, func(c int) string {
			switch c {
			case 0:
				return fmt.Sprint(1 + r.IntN(50))
			case 1:
				return pick(r, synPlace)
			case 2:
				return fmt.Sprint(10000 + r.IntN(3000000))
			case 3:
				return fmt.Sprintf("%.1f", 10+r.Float64()*900)
			default:
				return fmt.Sprint(900 + r.IntN(1000))
			}
		}},
		{"Schedule", []string{"Date", "Time", "Event", "Venue"}, func(c int) string {
			switch c {
			case 0:
				return fmt.Sprintf("%d %s", 1+r.IntN(28), pick(r, synMonth))
			case 1:
				return fmt.Sprintf("%02d:%02d", 8+r.IntN(12), 15*r.IntN(4))
			case 2:
				return title(pick(r, synTopic)) + " " + pick(r, []string{"opening", "final", "meeting", "review", "concert", "lecture"})
			default:
				return pick(r, synPlace) + " " + pick(r, []string{"Hall", "Arena", "Library", "Centre", "Park"})
			}
		}},
	}
	s := pick(r, shapes)
	rows := 2 + r.IntN(12)
	var b strings.Builder
	if r.IntN(2) == 0 {
		b.WriteString(s.title + "\n")
	}
	layout := r.IntN(4)
	sep := map[int]string{0: " | ", 1: ",", 2: "\t", 3: " | "}[layout]
	if layout == 0 {
		b.WriteString("| " + strings.Join(s.cols, " | ") + " |\n|" + strings.Repeat("---|", len(s.cols)) + "\n")
	} else {
		b.WriteString(strings.Join(s.cols, sep) + "\n")
	}
	for i := 0; i < rows; i++ {
		cells := make([]string, len(s.cols))
		for c := range cells {
			cells[c] = s.cell(c)
		}
		if layout == 0 {
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		} else {
			b.WriteString(strings.Join(cells, sep) + "\n")
		}
	}
	return strings.TrimSpace(b.String())
}

// synCode writes a short code answer: a sentence or two of explanation
// and a snippet in one of several languages, the way a Q&A answer reads.
func synCode(r *rand.Rand) string {
	v, n := pick(r, synVerb), pick(r, synNoun)
	fn := v + title(n)
	intros := []string{
		"You can do this with a small helper function:",
		"The problem is that the variable is shadowed inside the loop. Try this instead:",
		"Use the standard library; there is no need for a third-party package here.",
		"Here is a minimal example that reproduces the behaviour:",
		"I would write it like this, which also handles the empty case:",
		"Make sure the file is closed even when an error occurs, for example:",
		"This works for me on version 3.11:",
		"The easiest way is to " + v + " each " + n + " in a loop and collect the results.",
		"As the documentation says, the function returns an error if the input is empty. Check it first:",
	}
	outros := []string{"", "Note that this runs in linear time.", "Hope this helps.", "Run the tests again after the change.",
		"You may need to install the package first with pip install requests.", "See the official docs for more options.",
		"This should print the expected output.", "Edit: fixed a typo in the loop condition."}
	var code string
	switch r.IntN(6) {
	case 0:
		code = fmt.Sprintf("def %s(%ss):\n    result = []\n    for %s in %ss:\n        if not %s:\n            continue\n        result.append(%s.strip())\n    return result\n\nprint(%s(['a', 'b ', '']))",
			strings.ToLower(v)+"_"+n, n, n, n, n, n, strings.ToLower(v)+"_"+n)
	case 1:
		code = fmt.Sprintf("func %s(%ss []string) (int, error) {\n\tif len(%ss) == 0 {\n\t\treturn 0, errors.New(\"no %ss\")\n\t}\n\tn := 0\n\tfor _, s := range %ss {\n\t\tn += len(s)\n\t}\n\treturn n, nil\n}",
			fn, n, n, n, n)
	case 2:
		code = fmt.Sprintf("const %s = async (id) => {\n  const res = await fetch(`/api/%ss/${id}`);\n  if (!res.ok) {\n    throw new Error(`HTTP ${res.status}`);\n  }\n  return res.json();\n};", fn, n)
	case 3:
		code = fmt.Sprintf("SELECT %s_id, COUNT(*) AS total\nFROM %ss\nWHERE status = '%s'\nGROUP BY %s_id\nORDER BY total DESC\nLIMIT %d;", n, n, pick(r, synStatus), n, 5+r.IntN(20))
	case 4:
		code = fmt.Sprintf("#!/bin/sh\nset -e\nfor f in ./%ss/*.txt; do\n  echo \"processing $f\"\n  wc -l \"$f\"\ndone", n)
	default:
		code = fmt.Sprintf("public static int %s(List<String> %ss) {\n    int count = 0;\n    for (String s : %ss) {\n        if (s != null && !s.isEmpty()) {\n            count++;\n        }\n    }\n    return count;\n}", fn, n, n)
	}
	fence := "```"
	if r.IntN(3) == 0 {
		return pick(r, intros) + "\n\n" + code + "\n\n" + pick(r, outros)
	}
	return strings.TrimSpace(pick(r, intros) + "\n" + fence + "\n" + code + "\n" + fence + "\n" + pick(r, outros))
}

// synTool writes tool output: log lines, a JSON API result, a shell
// listing or search results.
func synTool(r *rand.Rand) string {
	var b strings.Builder
	switch r.IntN(4) {
	case 0:
		for i := 0; i < 3+r.IntN(8); i++ {
			fmt.Fprintf(&b, "2024-%02d-%02dT%02d:%02d:%02dZ %s %s %s id=%d took=%dms\n", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60),
				pick(r, synLevel), pick(r, synVerb), pick(r, synNoun), r.IntN(100000), r.IntN(2000))
		}
	case 1:
		b.WriteString(`{"status": "` + pick(r, synStatus) + `", "items": [`)
		for i := 0; i < 1+r.IntN(4); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"id": %d, "%s": "%s", "owner": "%s", "updated": "2024-%02d-%02d"}`, r.IntN(9999), pick(r, synNoun), pick(r, synThing), strings.ToLower(pick(r, synFirst)), 1+r.IntN(12), 1+r.IntN(28))
		}
		fmt.Fprintf(&b, `], "next_page": %d}`, r.IntN(20))
	case 2:
		fmt.Fprintf(&b, "$ ls -l %ss\n", pick(r, synNoun))
		for i := 0; i < 2+r.IntN(6); i++ {
			fmt.Fprintf(&b, "-rw-r--r-- 1 %s staff %6d %s %2d %02d:%02d %s_%d.txt\n", strings.ToLower(pick(r, synFirst)), r.IntN(90000), pick(r, synMonth)[:3], 1+r.IntN(28), r.IntN(24), r.IntN(60), pick(r, synNoun), i)
		}
	default:
		fmt.Fprintf(&b, "Search results for \"%s %s\":\n", pick(r, synTopic), pick(r, synPlace))
		for i := 1; i <= 2+r.IntN(4); i++ {
			fmt.Fprintf(&b, "%d. %s %s in %s - %s guide, updated %s %d.\n", i, title(pick(r, synTopic)), pick(r, []string{"plan", "report", "overview", "notes", "checklist"}),
				pick(r, synPlace), pick(r, []string{"A practical", "The complete", "A short", "An illustrated"}), pick(r, synMonth), 2015+r.IntN(10))
		}
	}
	return strings.TrimSpace(b.String())
}

// synProse writes a short business or personal note.
func synProse(r *rand.Rand) string {
	t, p := pick(r, synTopic), pick(r, synPlace)
	ss := []string{
		fmt.Sprintf("Hi %s,", pick(r, synFirst)),
		fmt.Sprintf("The %s in %s is on track for %s.", t, p, pick(r, synMonth)),
		fmt.Sprintf("Please review the attached %s notes before Thursday and add your comments.", t),
		fmt.Sprintf("We ordered %d new %ss for the %s office.", 2+r.IntN(30), pick(r, synThing), p),
		fmt.Sprintf("%s will present the %s figures at the next meeting.", synName(r), t),
		"Let me know if you have any questions.",
		fmt.Sprintf("Follow the instructions in the %s guide to set up your account.", t),
		fmt.Sprintf("The delivery to %s was delayed by two days because of the weather.", p),
		fmt.Sprintf("Remember to submit your expenses for the %s trip by the end of the month.", p),
		"Thanks again for your help.",
		fmt.Sprintf("Best regards,\n%s", synName(r)),
	}
	k := 2 + r.IntN(5)
	r.Shuffle(len(ss), func(i, j int) { ss[i], ss[j] = ss[j], ss[i] })
	return strings.Join(ss[:k], " ")
}

// SyntheticBenign returns n generated benign documents of the kinds above
// (tables, code answers, tool output, short notes), with their kind.
func SyntheticBenign(n int, seed uint64) (docs, kinds []string) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	gens := []struct {
		kind string
		f    func(*rand.Rand) string
	}{{"table", synTable}, {"code", synCode}, {"tool", synTool}, {"prose", synProse}}
	for i := 0; i < n; i++ {
		g := gens[i%len(gens)]
		docs = append(docs, g.f(r))
		kinds = append(kinds, g.kind)
	}
	return docs, kinds
}

package aegis

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/cli"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// readmeSection returns the README's text from the heading that starts
// with title to the next heading of the same or a higher level.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+title)
	if i < 0 {
		t.Fatalf("README has no %q section", title)
	}
	s = s[i+1:]
	level := strings.Index(s, " ")
	for _, l := range strings.SplitAfter(s, "\n")[1:] {
		if strings.HasPrefix(l, "#") && strings.Index(l, " ") <= level {
			return s[:strings.Index(s, l)]
		}
	}
	return s
}

// TestReadmeErrorTables: the reason table names every action a verdict
// can carry (fix_syntax included, which outputs show), and no row of the
// error tables is there twice for one status and code.
func TestReadmeErrorTables(t *testing.T) {
	sec := readmeSection(t, "### Reason codes and error codes")
	for _, a := range validator.Actions {
		if !strings.Contains(sec, "`"+string(a)+"`") {
			t.Errorf("the reason table does not name the action %s", a)
		}
	}
	seen := map[string]string{}
	for _, l := range strings.Split(sec, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		key := strings.TrimSpace(cells[1]) + " " + strings.TrimSpace(cells[2])
		if prev, ok := seen[key]; ok {
			t.Errorf("two rows for %s:\n%s\n%s", key, prev, l)
		}
		seen[key] = l
	}
}

// TestReadmeCommands: the Commands table names every command aegis has.
func TestReadmeCommands(t *testing.T) {
	sec := readmeSection(t, "## Commands")
	root := cli.NewRoot(&cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if !strings.Contains(sec, "`aegis "+c.Name()) {
			t.Errorf("the Commands table does not name aegis %s", c.Name())
		}
	}
}

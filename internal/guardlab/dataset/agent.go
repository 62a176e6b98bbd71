package dataset

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"strings"

	"go.yaml.in/yaml/v3"
)

// AgentItem is one text of the agent evaluation: a tool result (or a
// user's task) with the conversation it is placed in.
type AgentItem struct {
	// Group names the row it counts in ("agentdojo/important_instructions",
	// "injecagent/dh", "agentdojo-benign/banking").
	Group string
	Label int // 1: injected
	// User is the user's request before the tool call; Tool and Args the
	// call whose result Text is. For a user task alone, Tool is empty and
	// Text is the user's message.
	User, Tool, Args, Text string
}

// agentdojoTool is the tool whose output each suite's injected texts are
// placed as (AgentDojo's tools for reading each suite's data).
var agentdojoTool = map[string]string{
	"banking": "read_file", "slack": "read_channel_messages", "travel": "get_rating_reviews_for_hotels",
	"workspace": "search_emails",
}

// AgentDojoInjected builds the injected tool outputs the AgentDojo way:
// every attack template with every injection task's goal ({user} Emma
// Johnson, {model} the assistant, {tools} left out), each placed alone as
// the result of a call to a tool of the goal's suite, after one of that
// suite's user tasks (taken in turn).
func AgentDojoInjected(root string) ([]AgentItem, error) {
	dir := filepath.Join(root, "agentdojo")
	var tpls []struct {
		Attack   string `json:"attack"`
		Template string `json:"template"`
	}
	if err := readJSONLines(filepath.Join(dir, "attack_templates.jsonl"), &tpls); err != nil {
		return nil, err
	}
	var goals []struct {
		Suite string `json:"suite"`
		Goal  string `json:"goal"`
	}
	if err := readJSONLines(filepath.Join(dir, "injection_tasks.jsonl"), &goals); err != nil {
		return nil, err
	}
	tasks, err := agentdojoTasks(dir)
	if err != nil {
		return nil, err
	}
	var out []AgentItem
	turn := map[string]int{}
	for _, t := range tpls {
		for _, g := range goals {
			r := strings.NewReplacer("{goal}", g.Goal, "{user}", "Emma Johnson", "{model}", "the assistant", "{tools}", "")
			ts := tasks[g.Suite]
			user := ""
			if len(ts) > 0 {
				user = ts[turn[g.Suite]%len(ts)]
				turn[g.Suite]++
			}
			out = append(out, AgentItem{Group: "agentdojo/" + t.Attack, Label: 1, User: user,
				Tool: agentdojoTool[g.Suite], Args: "{}", Text: r.Replace(t.Template)})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("agentdojo: no templates or goals")
	}
	return out, nil
}

func agentdojoTasks(dir string) (map[string][]string, error) {
	var rows []struct {
		Suite  string `json:"suite"`
		Prompt string `json:"prompt"`
	}
	if err := readJSONLines(filepath.Join(dir, "user_tasks.jsonl"), &rows); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.Suite] = append(out[r.Suite], r.Prompt)
	}
	return out, nil
}

// AgentDojoUserTasks are the user tasks, as a user's messages.
func AgentDojoUserTasks(root string) ([]AgentItem, error) {
	tasks, err := agentdojoTasks(filepath.Join(root, "agentdojo"))
	if err != nil {
		return nil, err
	}
	var out []AgentItem
	for _, suite := range sortedKeys(tasks) {
		for _, p := range tasks[suite] {
			out = append(out, AgentItem{Group: "agentdojo-user-tasks/" + suite, User: p, Text: p})
		}
	}
	return out, nil
}

// AgentDojoBenign are the tool outputs of AgentDojo's environments with
// every injection placeholder at its benign default: each record (an
// e-mail, a file, a calendar event, a message, a web page, a hotel with its
// reviews, a transaction) as the JSON a tool returns, placed after a call
// to the suite's tool and one of its user tasks.
func AgentDojoBenign(root string) ([]AgentItem, error) {
	dir := filepath.Join(root, "agentdojo")
	tasks, err := agentdojoTasks(dir)
	if err != nil {
		return nil, err
	}
	var out []AgentItem
	for _, suite := range []string{"banking", "slack", "travel", "workspace"} {
		sd := filepath.Join(dir, "suites", suite)
		var vectors map[string]struct {
			Default string `yaml:"default"`
		}
		if err := readYAML(filepath.Join(sd, "injection_vectors.yaml"), &vectors); err != nil {
			return nil, err
		}
		pairs := make([]string, 0, 2*len(vectors))
		for k, v := range vectors {
			pairs = append(pairs, "{"+k+"}", v.Default)
		}
		fill := strings.NewReplacer(pairs...)
		files := []string{filepath.Join(sd, "environment.yaml")}
		if suite == "workspace" {
			files = []string{filepath.Join(sd, "include", "inbox.yaml"), filepath.Join(sd, "include", "calendar.yaml"), filepath.Join(sd, "include", "cloud_drive.yaml")}
		}
		n := 0
		for _, f := range files {
			var doc any
			if err := readYAML(f, &doc); err != nil {
				return nil, err
			}
			for _, rec := range records(doc) {
				b, _ := json.Marshal(fillStrings(rec, fill))
				ts := tasks[suite]
				out = append(out, AgentItem{Group: "agentdojo-benign/" + suite, User: ts[n%len(ts)],
					Tool: agentdojoTool[suite], Args: "{}", Text: string(b)})
				n++
			}
		}
	}
	return out, nil
}

// records returns the maps in doc that hold no map themselves: the records
// a tool returns.
func records(doc any) []map[string]any {
	var out []map[string]any
	var walk func(v any) bool // reports whether v is or holds a map
	walk = func(v any) bool {
		switch t := v.(type) {
		case map[string]any:
			inner := false
			for _, k := range sortedKeys(t) {
				if walk(t[k]) {
					inner = true
				}
			}
			if !inner {
				out = append(out, t)
			}
			return true
		case []any:
			has := false
			for _, e := range t {
				if walk(e) {
					has = true
				}
			}
			return has
		}
		return false
	}
	walk(doc)
	return out
}

func fillStrings(v any, r *strings.Replacer) any {
	switch t := v.(type) {
	case string:
		return r.Replace(t)
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = fillStrings(e, r)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = fillStrings(e, r)
		}
		return l
	}
	return v
}

// InjecAgent returns InjecAgent's 1,054 test cases: the user's
// instruction, the call the agent made for it and the tool response with
// the attacker's instruction in it; Group is injecagent/dh (direct harm)
// or injecagent/ds (data stealing).
func InjecAgent(root string) ([]AgentItem, error) {
	var out []AgentItem
	for _, kind := range []string{"dh", "ds"} {
		b, err := os.ReadFile(filepath.Join(root, "injecagent", "test_cases_"+kind+"_base.json"))
		if err != nil {
			return nil, fmt.Errorf("injecagent: %w", err)
		}
		var rows []map[string]any
		if err := json.Unmarshal(b, &rows); err != nil {
			return nil, fmt.Errorf("injecagent: test_cases_%s_base.json: %w", kind, err)
		}
		for _, r := range rows {
			s := func(k string) string { v, _ := r[k].(string); return v }
			out = append(out, AgentItem{Group: "injecagent/" + kind, Label: 1, User: s("User Instruction"),
				Tool: s("User Tool"), Args: s("Tool Parameters"), Text: s("Tool Response")})
		}
	}
	return out, nil
}

func readJSONLines(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	var lines []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), maxLine)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, json.RawMessage(l))
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("dataset: %s: %w", path, err)
	}
	b, _ := json.Marshal(lines)
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("dataset: %s: %w", path, err)
	}
	return nil
}

func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("dataset: %w", err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("dataset: %s: %w", path, err)
	}
	return nil
}

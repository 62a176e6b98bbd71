package mcp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-sentinel/aegis/internal/guardlab/doccorpus"
)

// TestOrdinaryFilesThroughFilesystem reads 100 ordinary files of the
// held-out part of the benign document corpus (source in several
// languages, READMEs and docs, config, logs, web pages, e-mails, API
// answers; built from this machine's files, see doccorpus) through
// `aegis mcp stdio` in front of the real server-filesystem, with the
// default policy: at most 1 may be withheld or changed.
func TestOrdinaryFilesThroughFilesystem(t *testing.T) {
	cache := npmParts(t)
	bin := aegisBin(t)
	docs, err := doccorpus.Build(doccorpus.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, held := doccorpus.Split(docs)
	byKind := map[doccorpus.Kind][]doccorpus.Doc{}
	for _, d := range held {
		byKind[d.Kind] = append(byKind[d.Kind], d)
	}
	var pick []doccorpus.Doc // round robin over the kinds, in corpus order
	for i := 0; len(pick) < 100; i++ {
		added := false
		for _, k := range doccorpus.Kinds {
			if i < len(byKind[k]) && len(pick) < 100 {
				pick = append(pick, byKind[k][i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	if len(pick) < 100 {
		t.Fatalf("only %d held-out documents on this machine", len(pick))
	}
	root := t.TempDir()
	for i, d := range pick {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("doc%03d.txt", i)), []byte(d.Text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fsJS := filepath.Join(cache, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	cmd := exec.Command(bin, "mcp", "stdio", "--incidents-db", filepath.Join(t.TempDir(), "incidents.db"), "--", "node", fsJS, root)
	ctx := context.Background()
	client := sdk.NewClient(&sdk.Implementation{Name: "files-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	bad := 0
	for i, d := range pick {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(root, fmt.Sprintf("doc%03d.txt", i))}})
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		got := ""
		if len(res.Content) == 1 {
			if tc, ok := res.Content[0].(*sdk.TextContent); ok {
				got = tc.Text
			}
		}
		if res.IsError || got != d.Text {
			bad++
			t.Logf("%s (%s, %d bytes): withheld=%v changed=%v", d.Kind, filepath.Base(d.Path), len(d.Text), res.IsError, got != d.Text)
		}
	}
	t.Logf("%d of %d ordinary files withheld or changed through aegis mcp stdio", bad, len(pick))
	if bad > 1 {
		t.Errorf("%d of 100 ordinary files withheld or changed, want at most 1", bad)
	}
}

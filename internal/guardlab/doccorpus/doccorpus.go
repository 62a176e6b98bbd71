// Package doccorpus builds the benign document corpus the tool-result
// screen is measured on: ordinary files of the kinds an agent reads
// (source code in several languages, READMEs and docs, configuration,
// logs, web pages, e-mails, JSON API answers), read from the machine it
// runs on rather than copied into the repository.
//
// Every kind lists several places to look; the ones present are used, so
// the corpus is built on any Debian machine with Go installed (GOROOT's
// sources, documents and test data, /usr/include, /usr/share/perl,
// /usr/share/doc, /etc, /var/log) and grows with what else is there
// (Python's standard library, global node_modules). E-mails and API
// answers are too rare on a build machine; the project's own hand-written
// ones (testdata embedded here) are added to what is found.
//
// The selection is fixed by content: candidates are ordered by the
// SHA-256 of their path, read in that order, and a kind takes the first
// Options.PerKind files that are text of the allowed size. The split is
// fixed by content too: a document is held out when the first byte of
// the SHA-256 of its text is odd. Nothing is ever tuned on the held-out
// part.
package doccorpus

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kind is what a document is.
type Kind string

// The kinds of the corpus.
const (
	GoCode     Kind = "code/go"
	PythonCode Kind = "code/python"
	CCode      Kind = "code/c"
	JSCode     Kind = "code/js"
	PerlCode   Kind = "code/perl"
	ShellCode  Kind = "code/shell"
	Docs       Kind = "docs"
	Config     Kind = "config"
	Log        Kind = "log"
	HTML       Kind = "html"
	Email      Kind = "email"
	JSON       Kind = "json"
)

// Kinds lists every kind in report order.
var Kinds = []Kind{GoCode, PythonCode, CCode, JSCode, PerlCode, ShellCode, Docs, Config, Log, HTML, Email, JSON}

// Doc is one document of the corpus.
type Doc struct {
	Kind Kind
	// Path is where it was read ("embedded:..." for the project's own).
	Path string
	Text string
	// HeldOut marks the evaluation part (see the package comment).
	HeldOut bool
}

// Options bound the corpus.
type Options struct {
	// PerKind is the most files one kind takes.
	PerKind int
	// MinBytes and MaxBytes bound a document; longer files are cut at the
	// last line break before MaxBytes.
	MinBytes, MaxBytes int
	// MaxCandidates bounds how many paths one kind's walk collects.
	MaxCandidates int
	// GoRoot is Go's installation ("" means $GOROOT, else the one this
	// binary was built with, else /usr/local/go).
	GoRoot string
}

// DefaultOptions is what the evaluation uses.
func DefaultOptions() Options {
	return Options{PerKind: 120, MinBytes: 300, MaxBytes: 64 << 10, MaxCandidates: 40000}
}

// source is one place to look for a kind: a root directory and a match
// on the path below it.
type source struct {
	root  string
	match func(rel string) bool
}

func ext(exts ...string) func(string) bool {
	return func(p string) bool {
		for _, e := range exts {
			if strings.HasSuffix(p, e) {
				return true
			}
		}
		return false
	}
}

func sources(goroot string) map[Kind][]source {
	pyRoots := []string{"/usr/lib/python3", "/usr/local/lib/python3"}
	if m, _ := filepath.Glob("/usr/lib/python3.*"); len(m) > 0 {
		pyRoots = append(pyRoots, m...)
	}
	if m, _ := filepath.Glob("/root/.pyenv/versions/*/lib/python3.*"); len(m) > 0 {
		pyRoots = append(pyRoots, m...)
	}
	var py []source
	for _, r := range pyRoots {
		py = append(py, source{r, ext(".py")})
	}
	var pyMail []source
	for _, r := range pyRoots {
		pyMail = append(pyMail, source{filepath.Join(r, "test/test_email/data"), func(p string) bool { return strings.HasPrefix(filepath.Base(p), "msg_") }})
	}
	notTestdata := func(f func(string) bool) func(string) bool {
		return func(p string) bool { return f(p) && !strings.Contains(p, "testdata/") }
	}
	readme := func(p string) bool {
		b := strings.ToLower(filepath.Base(p))
		return strings.HasPrefix(b, "readme") || strings.HasSuffix(b, ".md") || strings.HasSuffix(b, ".rst") ||
			strings.HasSuffix(b, ".txt") || strings.HasSuffix(b, ".txt.gz") || strings.HasSuffix(b, ".md.gz")
	}
	confExt := ext(".conf", ".cfg", ".ini", ".yaml", ".yml", ".toml", ".service", ".rules", ".list", ".sources")
	return map[Kind][]source{
		GoCode:     {{filepath.Join(goroot, "src"), notTestdata(ext(".go"))}},
		PythonCode: py,
		CCode:      {{"/usr/include", ext(".h")}, {filepath.Join(goroot, "src"), notTestdata(ext(".c", ".h"))}},
		JSCode: {{"/usr/lib/node_modules", ext(".js")}, {"/usr/local/lib/node_modules", ext(".js")},
			{filepath.Join(goroot, "src"), ext(".js")}, {filepath.Join(goroot, "lib"), ext(".js")}, {filepath.Join(goroot, "misc"), ext(".js")}},
		PerlCode: {{"/usr/share/perl", ext(".pm", ".pl")}, {"/usr/share/perl5", ext(".pm", ".pl")}, {"/usr/lib/x86_64-linux-gnu/perl-base", ext(".pm")},
			{"/usr/lib/x86_64-linux-gnu/perl", ext(".pm")}},
		ShellCode: {{"/usr/share", ext(".sh", ".bash")}, {"/etc", ext(".sh", ".bash", "bashrc", "profile")}, {filepath.Join(goroot, "src"), ext(".bash", ".sh")},
			{filepath.Join(goroot, "lib"), ext(".bash", ".sh")}, {"/usr/lib/git-core", ext(".sh")}},
		Docs: {{"/usr/share/doc", readme}, {filepath.Join(goroot, "src"), func(p string) bool { return strings.HasPrefix(filepath.Base(p), "README") }},
			{filepath.Join(goroot, "doc"), ext(".md", ".txt")}, {"/usr/lib/node_modules", readme}, {"/usr/local/lib/node_modules", readme}},
		Config: {{"/etc", func(p string) bool { return !strings.HasPrefix(p, "ssl/") && !strings.Contains(p, "shadow") }},
			{"/usr/share", confExt}, {"/usr/lib/systemd", confExt}},
		Log: {{"/var/log", func(p string) bool {
			return strings.HasSuffix(p, ".log") || strings.Contains(p, ".log.") && strings.HasSuffix(p, ".gz")
		}}},
		HTML: {{"/usr/share/doc", ext(".html", ".htm")}, {filepath.Join(goroot, "doc"), ext(".html")},
			{filepath.Join(goroot, "src"), ext(".html", ".tmpl")}, {filepath.Join(goroot, "misc"), ext(".html")}},
		Email: pyMail,
		JSON: {{filepath.Join(goroot, "src"), ext(".json")}, {"/usr/share", ext(".json")}, {"/usr/lib/node_modules", ext("package.json")},
			{"/usr/local/lib/node_modules", ext("package.json")}},
	}
}

// Build reads the corpus from this machine plus the embedded documents.
// It fails only when the corpus would be empty; a missing place is
// skipped.
func Build(opt Options) ([]Doc, error) {
	goroot := opt.GoRoot
	if goroot == "" {
		goroot = os.Getenv("GOROOT")
	}
	if goroot == "" {
		// The installation this binary was built with (deprecated for
		// finding the go command, which is not what it is used for here).
		goroot = runtime.GOROOT() //nolint:staticcheck
	}
	if goroot == "" {
		goroot = "/usr/local/go"
	}
	seen := map[[32]byte]bool{}
	var out []Doc
	srcs := sources(goroot)
	for _, k := range Kinds {
		var cands []string
		for _, s := range srcs[k] {
			cands = append(cands, walk(s, opt.MaxCandidates-len(cands))...)
		}
		slices.SortFunc(cands, func(a, b string) int {
			ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
			return bytes.Compare(ha[:], hb[:])
		})
		n := 0
		for _, p := range cands {
			if n >= opt.PerKind {
				break
			}
			text, ok := readText(p, opt)
			if !ok {
				continue
			}
			parts := []string{text}
			if k == Log {
				// A build machine keeps few log files, each long: every
				// LogChunk bytes of one is a document of its own.
				parts = chunks(text, LogChunk)
			}
			for i, part := range parts {
				h := sha256.Sum256([]byte(part))
				if seen[h] || len(part) < opt.MinBytes || n >= opt.PerKind {
					continue
				}
				seen[h] = true
				path := p
				if len(parts) > 1 {
					path = fmt.Sprintf("%s#%d", p, i+1)
				}
				out = append(out, Doc{Kind: k, Path: path, Text: part, HeldOut: h[0]&1 == 1})
				n++
			}
		}
	}
	emb, err := Embedded()
	if err != nil {
		return nil, err
	}
	for _, d := range emb {
		h := sha256.Sum256([]byte(d.Text))
		if !seen[h] {
			seen[h] = true
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("doccorpus: no documents found")
	}
	return out, nil
}

// LogChunk is the size of the pieces log files are cut into.
const LogChunk = 4 << 10

// chunks cuts text at line breaks into pieces of at most size bytes (a
// longer line is a piece of its own).
func chunks(text string, size int) []string {
	var out []string
	for len(text) > size {
		i := strings.LastIndexByte(text[:size], '\n')
		if i <= 0 { // no line break: cut before a rune start
			i = size - 1
			for i > 0 && !utf8.RuneStart(text[i+1]) {
				i--
			}
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

// walk collects up to limit regular files under s.root that s matches,
// in directory order; a missing root gives none.
func walk(s source, limit int) []string {
	var out []string
	if limit <= 0 {
		return nil
	}
	_ = filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(s.root, p)
		if s.match(rel) {
			out = append(out, p)
			if len(out) >= limit {
				return fs.SkipAll
			}
		}
		return nil
	})
	return out
}

// readText reads p (gunzipping .gz) and returns it when it is valid UTF-8
// text of the allowed size, cut at a line break before MaxBytes.
func readText(p string, opt Options) (string, bool) {
	fi, err := os.Stat(p)
	if err != nil || fi.Size() > 4<<20 {
		return "", false
	}
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(p, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return "", false
		}
		defer z.Close()
		r = z
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(opt.MaxBytes)+1))
	if err != nil {
		return "", false
	}
	if len(b) > opt.MaxBytes {
		b = b[:opt.MaxBytes]
		if i := bytes.LastIndexByte(b, '\n'); i > 0 {
			b = b[:i+1]
		}
	}
	if len(b) < opt.MinBytes || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", false
	}
	return string(b), true
}

//go:embed testdata/emails.txt
var emails string

//go:embed testdata/api.txt
var apis string

// Embedded returns the project's own hand-written documents: e-mails and
// JSON API answers, entries separated by lines of "=====".
func Embedded() ([]Doc, error) {
	var out []Doc
	for _, f := range []struct {
		kind Kind
		name string
		text string
	}{{Email, "emails.txt", emails}, {JSON, "api.txt", apis}} {
		text := f.text
		for strings.HasPrefix(text, "#") { // leading comment lines
			_, text, _ = strings.Cut(text, "\n")
		}
		for i, e := range strings.Split(text, "\n=====\n") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			h := sha256.Sum256([]byte(e))
			out = append(out, Doc{Kind: f.kind, Path: fmt.Sprintf("embedded:%s#%d", f.name, i+1), Text: e, HeldOut: h[0]&1 == 1})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("doccorpus: embedded documents are empty")
	}
	return out, nil
}

// Split returns the training and held-out parts of docs.
func Split(docs []Doc) (train, held []Doc) {
	for _, d := range docs {
		if d.HeldOut {
			held = append(held, d)
		} else {
			train = append(train, d)
		}
	}
	return train, held
}

// LengthBucket names a document's length class for reports.
func LengthBucket(n int) string {
	switch {
	case n < 2<<10:
		return "<2KiB"
	case n < 8<<10:
		return "2-8KiB"
	case n < 32<<10:
		return "8-32KiB"
	}
	return ">=32KiB"
}

// LengthBuckets lists the buckets in order.
var LengthBuckets = []string{"<2KiB", "2-8KiB", "8-32KiB", ">=32KiB"}

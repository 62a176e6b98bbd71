package upstream

import "testing"

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		notes          int
		err            bool
	}{
		{"full", "http://127.0.0.1:8080", "http://127.0.0.1:8080", 0, false},
		{"trailing slash", "http://127.0.0.1:8080/", "http://127.0.0.1:8080", 0, false},
		{"host and port", "127.0.0.1:8080", "http://127.0.0.1:8080", 1, false},
		{"name and port", "localhost:11434", "http://localhost:11434", 1, false},
		{"openai base url", "http://127.0.0.1:8080/v1", "http://127.0.0.1:8080", 1, false},
		{"openai base url slash", "https://example.com/v1/", "https://example.com", 1, false},
		{"both", "127.0.0.1:8080/v1", "http://127.0.0.1:8080", 2, false},
		{"path prefix kept", "http://host/llm", "http://host/llm", 0, false},
		{"prefix and v1", "http://host/llm/v1", "http://host/llm", 1, false},
		{"other scheme", "ftp://host", "", 0, true},
		{"empty", " ", "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, notes, err := Normalize(tc.in)
			if (err != nil) != tc.err || got != tc.want || len(notes) != tc.notes {
				t.Fatalf("Normalize(%q) = %q %q %v, want %q with %d notes", tc.in, got, notes, err, tc.want, tc.notes)
			}
		})
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080", "127.0.0.1:8080/v1", "localhost:11434", "http://host/llm/v1/", "ftp://x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, _, err := Normalize(s)
		if err != nil {
			return
		}
		again, notes, err := Normalize(got)
		if err != nil || again != got || len(notes) != 0 {
			t.Fatalf("Normalize(%q) = %q, not a fixed point: %q %q %v", s, got, again, notes, err)
		}
	})
}

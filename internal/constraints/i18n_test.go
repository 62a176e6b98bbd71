package constraints

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/instruct"
	"go.yaml.in/yaml/v3"
)

// i18nCases: one response-language instruction per language of the guard's
// lexicons (English is TestCompileText's), with the language it asks for.
var i18nCases = map[string]struct{ prompt, want string }{
	"ar": {"اكتب قصة قصيرة عن قطة. أجب باللغة العربية.", "arabic"},
	"bn": {"একটি ছোট গল্প বলো। বাংলায় উত্তর দাও।", "bengali"},
	"de": {"Erzähl mir etwas über Katzen. Antworte bitte auf Englisch.", "english"},
	"el": {"Πες μου για τις γάτες. Απάντησε στα ελληνικά.", "greek"},
	"es": {"Háblame de los gatos. Responde en español.", "spanish"},
	"fa": {"درباره گربه ها بگو. به فارسی پاسخ بده.", "persian"},
	"fr": {"Parle-moi des chats. Réponds en français, s'il te plaît.", "french"},
	"he": {"ספר לי על חתולים. ענה בעברית.", "hebrew"},
	"hi": {"बिल्लियों के बारे में बताओ। हिंदी में जवाब दो।", "hindi"},
	"id": {"Ceritakan tentang kucing. Jawab dalam bahasa Indonesia.", "indonesian"},
	"it": {"Parlami dei gatti. Rispondi in italiano.", "italian"},
	"ja": {"猫について教えてください。日本語で答えてください。", "japanese"},
	"ko": {"고양이에 대해 알려줘. 한국어로 답해 줘.", "korean"},
	"nl": {"Vertel me over katten. Antwoord in het Nederlands.", "dutch"},
	"pl": {"Opowiedz mi o kotach. Odpowiedz po polsku.", "polish"},
	"pt": {"Fale-me sobre gatos. Responda em português.", "portuguese"},
	"ro": {"Spune-mi despre pisici. Răspunde în limba română.", "romanian"},
	"ru": {"Расскажи мне о кошках. Ответь на русском языке.", "russian"},
	"sv": {"Berätta om katter. Svara på svenska.", "swedish"},
	"th": {"เล่าเรื่องแมวให้ฟังหน่อย ตอบเป็นภาษาไทย", "thai"},
	"tr": {"Bana kediler hakkında bilgi ver. Türkçe cevap ver.", "turkish"},
	"uk": {"Розкажи мені про котів. Відповідай українською.", "ukrainian"},
	"vi": {"Kể cho tôi về mèo. Trả lời bằng tiếng Việt.", "vietnamese"},
	"zh": {"给我讲讲猫。请用中文回答。", "chinese"},
}

// TestDriftInOtherLanguages: the instructions the compiler knows compile
// in every language of the guard's lexicons, and the compiled checks fail
// an answer that ignores them ("Responde en español" answered in English).
func TestDriftInOtherLanguages(t *testing.T) {
	files, err := filepath.Glob("../guardlab/dataset/lexicon/*.txt")
	if err != nil || len(files) < 20 {
		t.Fatalf("lexicon languages: %v %v", files, err)
	}
	for _, f := range files {
		lang := strings.TrimSuffix(filepath.Base(f), ".txt")
		if lang == "en" {
			continue
		}
		t.Run("language "+lang, func(t *testing.T) {
			tc, ok := i18nCases[lang]
			if !ok {
				t.Fatalf("no response-language instruction for lexicon language %s", lang)
			}
			if got, want := summary(CompileText(tc.prompt)), "language{language="+tc.want+"}"; got != want {
				t.Fatalf("CompileText(%q)\n got %s\nwant %s", tc.prompt, got, want)
			}
		})
	}
	for _, tc := range []struct{ name, prompt, want string }{
		{"es limit", "Explica DNS en menos de 50 palabras.", "length{max_words=49}"},
		{"fr limit", "Explique le DNS en 40 mots maximum, pas plus de 40 mots.", "length{max_words=40}"},
		{"de limit", "Erkläre DNS in höchstens 30 Wörtern.", "length{max_words=30}"},
		{"ru limit", "Объясни DNS не более 30 слов.", "length{max_words=30}"},
		{"zh limit", "用100字以内解释DNS。", "length{max_chars=100}"},
		{"ja limit", "DNSを200文字以内で説明して。", "length{max_chars=200}"},
		{"es code only", "Escribe una función en Python que invierta una cadena. Solo el código.", "code_only{}"},
		{"de code only", "Schreibe eine Python-Funktion, nur den Code, ohne Erklärung.", "code_only{}"},
		{"zh code only", "写一个Python函数反转字符串，只给代码。", "code_only{}"},
		{"en code request", "Write a Python function that reverses a string.", "has_code{}"},
		{"en function that", "Write a function that checks whether a number is prime.", "has_code{}"},
		{"es code request", "Escribe una función en Python que invierta una cadena.", "has_code{}"},
		{"ja code request", "文字列を逆にする関数を書いて。", "has_code{}"},
		{"en essay is not code", "Write an essay on the function of the liver.", ""},
		{"en zip code", "Give me the zip code of the town hall.", ""},
		{"en explain code", "What does this Python function do?", ""},
		{"en tv programs", "Write a review of three TV programs.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summary(CompileText(tc.prompt)); got != tc.want {
				t.Fatalf("CompileText(%q)\n got %s\nwant %s", tc.prompt, got, tc.want)
			}
		})
	}
	// The compiled checks judge the answer.
	for _, tc := range []struct {
		name, prompt, answer string
		fail                 bool
	}{
		{"spanish asked, english given", "Háblame de los gatos. Responde en español.",
			"Cats are small domesticated carnivores that have lived alongside humans for thousands of years, valued for companionship and for hunting rodents.", true},
		{"spanish asked, spanish given", "Háblame de los gatos. Responde en español.",
			"Los gatos son pequeños carnívoros domésticos que han vivido junto a los humanos durante miles de años, apreciados por su compañía y por cazar roedores.", false},
		{"code asked, filler given", "Write a Python function that reverses a string.",
			"Sure! Reversing a string is a classic exercise, and there are many ways to do it. Let me know if you need anything else.", true},
		{"code asked, code given", "Write a Python function that reverses a string.",
			"Here it is:\n```python\ndef rev(s):\n    return s[::-1]\n```\n", false},
		{"code asked, bare code given", "Write a Python function that reverses a string.",
			"def rev(s):\n    return s[::-1]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge(t, tc.prompt, tc.answer); got != tc.fail {
				t.Fatalf("failed = %v, want %v", got, tc.fail)
			}
		})
	}
}

// judge runs the checks compiled from prompt over answer and reports
// whether any failed it.
func judge(t *testing.T, prompt, answer string) bool {
	t.Helper()
	// The compiled checks are the instruction checks; a registry of their
	// own keeps the test independent of what else is registered.
	reg := &validator.Registry{}
	instruct.Register(reg)
	failed := false
	for _, c := range CompileText(prompt) {
		spec, ok := reg.Lookup(c.Name)
		if !ok {
			t.Fatalf("check %s not registered", c.Name)
		}
		var cfg any
		if spec.Config != nil {
			cfg = spec.Config()
			var n yaml.Node
			if err := n.Encode(c.Config); err != nil {
				t.Fatal(err)
			}
			if err := policy.DecodeStrict(&n, cfg); err != nil {
				t.Fatal(err)
			}
		}
		v, err := spec.New(cfg, &validator.Request{})
		if err != nil || v == nil {
			t.Fatalf("%s: %v %v", c.Name, v, err)
		}
		v.Write([]byte(answer))
		v.Close()
		failed = failed || len(v.Findings()) > 0
	}
	return failed
}

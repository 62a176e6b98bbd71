package constraints

import (
	"regexp"
	"strconv"
	"strings"
)

// The instructions the compiler knows, phrased in the languages of the
// guard's lexicons (internal/guardlab/dataset/lexicon) besides English: the
// response language ("Responde en español", "日本語で答えて"), a word or
// character limit ("en menos de 50 palabras", "50字以内") and code only
// ("solo el código"). Each phrase is a case-insensitive RE2 pattern over
// the original text, run only when one of its guard words occurs.

// langPhrase recognises "answer in <language>" in one language: group 1
// of re is the language's name as that language writes it; names maps
// it, lower-cased, to the English name the language check takes.
type langPhrase struct {
	lang  string // ISO 639-1 code of the instruction's language
	guard []string
	re    *regexp.Regexp
	names map[string]string
}

// The names of the common target languages in each language; every
// language knows at least its own name and English.
var langPhrases = []langPhrase{
	{"es", []string{"espa", "ingl", "franc", "alem", "portu", "itali"},
		regexp.MustCompile(`(?i)\b(?:responde|responda|respondan|contesta|conteste|escribe|escriba|redacta|redacte|habla|hable|respuesta)\b[^.\n]{0,30}?\ben\s+(español|espanol|castellano|inglés|ingles|francés|frances|alemán|aleman|portugués|portugues|italiano)\b`),
		map[string]string{"español": "spanish", "espanol": "spanish", "castellano": "spanish", "inglés": "english", "ingles": "english",
			"francés": "french", "frances": "french", "alemán": "german", "aleman": "german", "portugués": "portuguese", "portugues": "portuguese", "italiano": "italian"}},
	{"fr", []string{"fran", "angl", "espag", "allem"},
		regexp.MustCompile(`(?i)(?:réponds|répondez|reponds|repondez|écris|écrivez|ecris|ecrivez|rédige|rédigez|redige|parle|parlez|réponse)\b[^.\n]{0,30}?\ben\s+(français|francais|anglais|espagnol|allemand|italien)\b`),
		map[string]string{"français": "french", "francais": "french", "anglais": "english", "espagnol": "spanish", "allemand": "german", "italien": "italian"}},
	{"de", []string{"deutsch", "englisch", "franz", "spanisch"},
		regexp.MustCompile(`(?i)\b(?:antworte|antworten|antwort|schreibe|schreib|schreiben|formuliere|formulieren)\b[^.\n]{0,30}?\b(?:auf|in)\s+(deutsch|englisch|französisch|franzoesisch|spanisch|italienisch)\b`),
		map[string]string{"deutsch": "german", "englisch": "english", "französisch": "french", "franzoesisch": "french", "spanisch": "spanish", "italienisch": "italian"}},
	{"it", []string{"italian", "ingles", "frances", "spagnol", "tedesc"},
		regexp.MustCompile(`(?i)\b(?:rispondi|risponda|rispondete|scrivi|scriva|scrivete|risposta)\b[^.\n]{0,30}?\bin\s+(italiano|inglese|francese|spagnolo|tedesco)\b`),
		map[string]string{"italiano": "italian", "inglese": "english", "francese": "french", "spagnolo": "spanish", "tedesco": "german"}},
	{"pt", []string{"portugu", "ingl", "espanhol", "franc"},
		regexp.MustCompile(`(?i)\b(?:responda|responde|respondam|escreva|escreve|redija|resposta)\b[^.\n]{0,30}?\bem\s+(português|portugues|inglês|ingles|espanhol|francês|frances)\b`),
		map[string]string{"português": "portuguese", "portugues": "portuguese", "inglês": "english", "ingles": "english", "espanhol": "spanish", "francês": "french", "frances": "french"}},
	{"nl", []string{"nederlands", "engels", "duits", "frans"},
		regexp.MustCompile(`(?i)\b(?:antwoord|beantwoord|schrijf|schrijft)\b[^.\n]{0,30}?\bin\s+het\s+(nederlands|engels|duits|frans)\b|\b(?:antwoord|beantwoord|schrijf)\b[^.\n]{0,30}?\bin\s+(nederlands|engels|duits|frans)\b`),
		map[string]string{"nederlands": "dutch", "engels": "english", "duits": "german", "frans": "french"}},
	{"pl", []string{"polsku", "angielsku", "niemiecku"},
		regexp.MustCompile(`(?i)(?:odpowiedz|odpowiadaj|odpowiedzcie|napisz|pisz|napiszcie)\b[^.\n]{0,30}?\bpo\s+(polsku|angielsku|niemiecku)\b`),
		map[string]string{"polsku": "polish", "angielsku": "english", "niemiecku": "german"}},
	{"ro", []string{"român", "roman", "englez"},
		regexp.MustCompile(`(?i)(?:răspunde|raspunde|răspundeți|raspundeti|scrie|scrieți|scrieti)\b[^.\n]{0,30}?\s(?:în|in)\s+(?:limba\s+)?(română|romana|engleză|engleza)|(?:răspunde|raspunde|scrie)\s+(românește|romaneste|englezește|englezeste)`),
		map[string]string{"română": "romanian", "romana": "romanian", "românește": "romanian", "romaneste": "romanian", "engleză": "english", "engleza": "english", "englezește": "english", "englezeste": "english"}},
	{"sv", []string{"svenska", "engelska", "tyska"},
		regexp.MustCompile(`(?i)\b(?:svara|skriv|besvara)\b[^.\n]{0,30}?\bpå\s+(svenska|engelska|tyska)\b`),
		map[string]string{"svenska": "swedish", "engelska": "english", "tyska": "german"}},
	{"tr", []string{"türkçe", "turkce", "ngilizce", "ingilizce", "almanca"},
		regexp.MustCompile(`(?i)(türkçe|turkce|i̇ngilizce|ingilizce|almanca)\s+(?:olarak\s+)?(?:cevap|yanıt|yanit|yaz|cevapla|yanıtla)`),
		map[string]string{"türkçe": "turkish", "turkce": "turkish", "i̇ngilizce": "english", "ingilizce": "english", "almanca": "german"}},
	{"id", []string{"indonesia", "inggris"},
		regexp.MustCompile(`(?i)\b(?:jawab|jawablah|tulis|tuliskan|balas|balaslah)\b[^.\n]{0,30}?\bdalam\s+bahasa\s+(indonesia|inggris)\b`),
		map[string]string{"indonesia": "indonesian", "inggris": "english"}},
	{"vi", []string{"tiếng", "tieng"},
		regexp.MustCompile(`(?i)(?:trả lời|tra loi|viết|viet)[^.\n]{0,30}?bằng\s+tiếng\s+(việt|anh)`),
		map[string]string{"việt": "vietnamese", "anh": "english"}},
	{"ru", []string{"русском", "английском", "немецком"},
		regexp.MustCompile(`(?i)(?:ответь|ответьте|отвечай|отвечайте|напиши|напишите|пиши|пишите)[^.\n]{0,30}?на\s+(русском|английском|немецком)`),
		map[string]string{"русском": "russian", "английском": "english", "немецком": "german"}},
	{"uk", []string{"українськ", "англійськ"},
		regexp.MustCompile(`(?i)(?:відповідай|відповідайте|напиши|напишіть|пиши|пишіть)[^.\n]{0,30}?(українською|англійською)`),
		map[string]string{"українською": "ukrainian", "англійською": "english"}},
	{"el", []string{"ελληνικά", "αγγλικά", "ελληνικα", "αγγλικα"},
		regexp.MustCompile(`(?i)(?:απάντησε|απαντήστε|απαντησε|γράψε|γράψτε|γραψε)[^.\n]{0,30}?(?:στα\s+)?(ελληνικά|ελληνικα|αγγλικά|αγγλικα)`),
		map[string]string{"ελληνικά": "greek", "ελληνικα": "greek", "αγγλικά": "english", "αγγλικα": "english"}},
	{"ar", []string{"العربية", "الإنجليزية", "الانجليزية"},
		regexp.MustCompile(`(?:أجب|اجب|أجيبي|أجيبوا|اكتب|اكتبي|رد|ردي)[^.\n]{0,30}?(?:باللغة\s+|ب)(العربية|الإنجليزية|الانجليزية)`),
		map[string]string{"العربية": "arabic", "الإنجليزية": "english", "الانجليزية": "english"}},
	{"fa", []string{"فارسی", "انگلیسی"},
		regexp.MustCompile(`به\s+(?:زبان\s+)?(فارسی|انگلیسی)\s+(?:پاسخ|جواب|بنویس)`),
		map[string]string{"فارسی": "persian", "انگلیسی": "english"}},
	{"he", []string{"עברית", "אנגלית"},
		regexp.MustCompile(`(?:ענה|עני|ענו|כתוב|כתבי|כתבו|השב|השיבו)[^.\n]{0,30}?ב(עברית|אנגלית)`),
		map[string]string{"עברית": "hebrew", "אנגלית": "english"}},
	{"hi", []string{"हिंदी", "हिन्दी", "अंग्रेज़ी", "अंग्रेजी"},
		regexp.MustCompile(`(हिंदी|हिन्दी|अंग्रेज़ी|अंग्रेजी)\s+में\s+(?:ही\s+)?(?:जवाब|उत्तर|लिख)`),
		map[string]string{"हिंदी": "hindi", "हिन्दी": "hindi", "अंग्रेज़ी": "english", "अंग्रेजी": "english"}},
	{"bn", []string{"বাংলায়", "ইংরেজিতে"},
		regexp.MustCompile(`(বাংলায়|ইংরেজিতে)\s+(?:উত্তর|লিখ|জবাব)`),
		map[string]string{"বাংলায়": "bengali", "ইংরেজিতে": "english"}},
	{"th", []string{"ภาษาไทย", "ภาษาอังกฤษ"},
		regexp.MustCompile(`(?:ตอบ|เขียน)(?:เป็น|ด้วย)?\s*(ภาษาไทย|ภาษาอังกฤษ)`),
		map[string]string{"ภาษาไทย": "thai", "ภาษาอังกฤษ": "english"}},
	{"ja", []string{"日本語で", "英語で", "中国語で"},
		regexp.MustCompile(`(日本語|英語|中国語)で(?:答え|回答|返答|書い|書け|記述|応答|説明)`),
		map[string]string{"日本語": "japanese", "英語": "english", "中国語": "chinese"}},
	{"ko", []string{"한국어로", "영어로", "일본어로"},
		regexp.MustCompile(`(한국어|영어|일본어)로\s*(?:답|대답|작성|써|응답|설명)`),
		map[string]string{"한국어": "korean", "영어": "english", "일본어": "japanese"}},
	{"zh", []string{"中文", "英文", "英语", "汉语", "日语"},
		regexp.MustCompile(`(?:用|以|使用)(中文|汉语|英文|英语|日语)(?:来)?(?:回答|回复|答复|写|作答|撰写)`),
		map[string]string{"中文": "chinese", "汉语": "chinese", "英文": "english", "英语": "english", "日语": "japanese"}},
}

func i18nLanguageRule(c *compiler) {
	for _, o := range c.out {
		if o.Name == "language" {
			return // an English instruction already named one
		}
	}
	for i := range langPhrases {
		p := &langPhrases[i]
		if !containsAny(strings.ToLower(c.orig), p.guard) {
			continue
		}
		m := p.re.FindStringSubmatchIndex(c.orig)
		if m == nil {
			continue
		}
		for g := 2; g+1 < len(m); g += 2 {
			if m[g] < 0 {
				continue
			}
			if target, ok := p.names[strings.ToLower(c.orig[m[g]:m[g+1]])]; ok {
				c.add("language", map[string]any{"language": target}, c.orig[m[0]:m[1]])
				return
			}
		}
	}
}

// limitPhrase recognises a length limit in one language: group 1 of re is
// the number; unit is "word" or "char"; below means "fewer than N".
type limitPhrase struct {
	re    *regexp.Regexp
	unit  string
	below bool
}

// limitGuards are the words for "word" and "character" the limit phrases
// need (lower-cased).
var limitGuards = []string{"palabra", "mots", "wörter", "worte", "parole", "palavra", "woorden", "słów", "cuvinte", "ord",
	"kata", "kelime", "từ", "слов", "слів", "λέξ", "كلمة", "کلمه", "מילים", "शब्द", "শব্দ", "คำ", "字", "語", "단어", "자"}

var limitPhrases = []limitPhrase{
	// Fewer than N words.
	{regexp.MustCompile(`(?i)\bmenos\s+de\s+(\d{1,5})\s+palabras`), "word", true},
	{regexp.MustCompile(`(?i)\bmoins\s+de\s+(\d{1,5})\s+mots`), "word", true},
	{regexp.MustCompile(`(?i)\bweniger\s+als\s+(\d{1,5})\s+w(?:ö|oe)rt`), "word", true},
	{regexp.MustCompile(`(?i)\bmeno\s+di\s+(\d{1,5})\s+parole`), "word", true},
	{regexp.MustCompile(`(?i)\bmenos\s+de\s+(\d{1,5})\s+palavras`), "word", true},
	{regexp.MustCompile(`(?i)\bminder\s+dan\s+(\d{1,5})\s+woorden`), "word", true},
	{regexp.MustCompile(`(?i)\bmniej\s+niż\s+(\d{1,5})\s+słów`), "word", true},
	{regexp.MustCompile(`(?i)\bmai\s+puțin\s+de\s+(\d{1,5})\s+(?:de\s+)?cuvinte`), "word", true},
	{regexp.MustCompile(`(?i)\b(?:färre|mindre)\s+än\s+(\d{1,5})\s+ord\b`), "word", true},
	{regexp.MustCompile(`(?i)\bkurang\s+dari\s+(\d{1,5})\s+kata\b`), "word", true},
	{regexp.MustCompile(`(?i)\b(\d{1,5})\s+kelimeden\s+(?:az|kısa)`), "word", true},
	{regexp.MustCompile(`(?i)(?:dưới|ít hơn)\s+(\d{1,5})\s+từ`), "word", true},
	{regexp.MustCompile(`(?i)(?:менее|меньше)\s+(\d{1,5})\s+слов`), "word", true},
	{regexp.MustCompile(`(?i)менше\s+(?:ніж\s+)?(\d{1,5})\s+слів`), "word", true},
	{regexp.MustCompile(`(?i)λιγότερ[οε]\s+από\s+(\d{1,5})\s+λέξεις`), "word", true},
	{regexp.MustCompile(`أقل\s+من\s+(\d{1,5})\s+كلم`), "word", true},
	{regexp.MustCompile(`کمتر\s+از\s+(\d{1,5})\s+کلمه`), "word", true},
	{regexp.MustCompile(`פחות\s+מ[-־]?\s*(\d{1,5})\s+מילים`), "word", true},
	{regexp.MustCompile(`(\d{1,5})\s+शब्दों\s+से\s+कम`), "word", true},
	{regexp.MustCompile(`(?:少于|少於)\s*(\d{1,5})\s*(?:个)?字`), "char", true},
	// At most N words.
	{regexp.MustCompile(`(?i)\b(?:no\s+más\s+de|máximo(?:\s+de)?|como\s+máximo)\s+(\d{1,5})\s+palabras`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:pas\s+plus\s+de|au\s+maximum|maximum)\s+(\d{1,5})\s+mots`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:höchstens|maximal|nicht\s+mehr\s+als)\s+(\d{1,5})\s+w(?:ö|oe)rt`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:massimo|non\s+più\s+di|al\s+massimo)\s+(\d{1,5})\s+parole`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:no\s+máximo|não\s+mais\s+(?:de|que))\s+(\d{1,5})\s+palavras`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:maximaal|hoogstens|niet\s+meer\s+dan)\s+(\d{1,5})\s+woorden`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:maksymalnie|najwyżej|nie\s+więcej\s+niż)\s+(\d{1,5})\s+słów`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:maximum|cel\s+mult)\s+(\d{1,5})\s+(?:de\s+)?cuvinte`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:högst|max|maximalt|inte\s+mer\s+än)\s+(\d{1,5})\s+ord\b`), "word", false},
	{regexp.MustCompile(`(?i)\b(?:maksimal|paling\s+banyak|tidak\s+lebih\s+dari)\s+(\d{1,5})\s+kata\b`), "word", false},
	{regexp.MustCompile(`(?i)en\s+fazla\s+(\d{1,5})\s+kelime`), "word", false},
	{regexp.MustCompile(`(?i)(?:tối đa|không quá)\s+(\d{1,5})\s+từ`), "word", false},
	{regexp.MustCompile(`(?i)(?:не\s+более|максимум|не\s+больше)\s+(\d{1,5})\s+слов`), "word", false},
	{regexp.MustCompile(`(?i)(?:не\s+більше|максимум)\s+(\d{1,5})\s+слів`), "word", false},
	{regexp.MustCompile(`(?i)(?:το\s+πολύ|μέχρι)\s+(\d{1,5})\s+λέξεις`), "word", false},
	{regexp.MustCompile(`(?:لا\s+(?:يزيد|تزيد)\s+عن|بحد\s+أقصى)\s+(\d{1,5})\s+كلم`), "word", false},
	{regexp.MustCompile(`(?:حداکثر)\s+(\d{1,5})\s+کلمه`), "word", false},
	{regexp.MustCompile(`(?:עד|לכל\s+היותר)\s+(\d{1,5})\s+מילים`), "word", false},
	{regexp.MustCompile(`(?:अधिकतम)\s+(\d{1,5})\s+शब्द`), "word", false},
	{regexp.MustCompile(`(\d{1,5})\s+শব্দের\s+মধ্যে`), "word", false},
	{regexp.MustCompile(`ไม่เกิน\s*(\d{1,5})\s*คำ`), "word", false},
	{regexp.MustCompile(`(\d{1,5})\s*(?:个)?字以内|不超过\s*(\d{1,5})\s*(?:个)?字`), "char", false},
	{regexp.MustCompile(`(\d{1,5})\s*(?:文字|字)以内`), "char", false},
	{regexp.MustCompile(`(\d{1,5})\s*語以内`), "word", false},
	{regexp.MustCompile(`(\d{1,5})\s*단어\s*(?:이내|이하)`), "word", false},
	{regexp.MustCompile(`(\d{1,5})\s*자\s*(?:이내|이하)`), "char", false},
}

func i18nLimitRule(c *compiler) {
	for _, o := range c.out {
		if o.Name == "length" {
			return // an English instruction set the limit
		}
	}
	for _, p := range limitPhrases {
		m := p.re.FindStringSubmatchIndex(c.orig)
		if m == nil {
			continue
		}
		n := 0
		for g := 2; g+1 < len(m); g += 2 {
			if m[g] >= 0 {
				n, _ = strconv.Atoi(c.orig[m[g]:m[g+1]])
			}
		}
		if p.below {
			n--
		}
		if n <= 0 {
			continue
		}
		key := "max_words"
		if p.unit == "char" {
			key = "max_chars"
		}
		c.add("length", map[string]any{key: n}, c.orig[m[0]:m[1]])
		return
	}
}

// codeOnlyPhrases are "code only" in the lexicon languages.
var codeOnlyPhrases = regexp.MustCompile(`(?i)(?:solo|solamente|únicamente)\s+(?:el\s+)?código|sin\s+explicaci|(?:seulement|uniquement)\s+(?:le\s+)?code|sans\s+explication|nur\s+(?:den\s+)?code|ohne\s+erkl(?:ä|ae)rung|solo\s+(?:il\s+)?codice|senza\s+spiegazion|apenas\s+(?:o\s+)?código|sem\s+explica|alleen\s+(?:de\s+)?code|zonder\s+uitleg|tylko\s+kod|bez\s+wyjaśnie|doar\s+codul|fără\s+explica|endast\s+kod|bara\s+kod|utan\s+förklaring|sadece\s+kod|açıklama\s+yapma|hanya\s+kode|tanpa\s+penjelasan|chỉ\s+(?:viết\s+)?code|không\s+giải\s+thích|только\s+код|без\s+объяснени|лише\s+код|тільки\s+код|без\s+пояснен|μόνο\s+(?:τον\s+)?κώδικα|χωρίς\s+εξήγηση|فقط\s+(?:ال)?(?:كود|شيفرة)|بدون\s+شرح|فقط\s+کد|بدون\s+توضیح|רק\s+(?:את\s+ה)?קוד|ללא\s+הסבר|केवल\s+कोड|सिर्फ\s+कोड|শুধু\s+কোড|เฉพาะโค้ด|แค่โค้ด|コードのみ|コードだけ|説明(?:は)?不要|코드만|설명\s*없이|只(?:要|给|输出|返回)?代码|仅(?:输出|返回)?代码|不要解释`)

var codeOnlyGuards = []string{"código", "code", "codice", "kod", "codul", "kode", "код", "κώδικα", "كود", "شيفرة", "کد", "קוד", "कोड",
	"কোড", "โค้ด", "コード", "코드", "代码", "explica", "erkl", "spiegaz", "uitleg", "wyjaśn", "förklar", "açıklama", "penjelasan",
	"giải thích", "объясн", "пояснен", "εξήγηση", "شرح", "توضیح", "הסבר", "説明", "설명", "解释"}

func i18nCodeOnlyRule(c *compiler) {
	for _, o := range c.out {
		if o.Name == "code_only" {
			return
		}
	}
	if m := codeOnlyPhrases.FindStringIndex(c.orig); m != nil {
		c.add("code_only", map[string]any{}, c.orig[m[0]:m[1]])
	}
}

// A request for code: a verb asking for something to be written and, in
// the same sentence, a word for code ("code", a snippet, a regex, "a
// function that ...") or a programming language's name beside a function,
// script, program, class or query. The answer
// must then contain code (the has_code check); an answer of filler only
// fails. Questions about code ("what does this function do?") ask for no
// verb of the list and compile nothing.
var (
	codeVerbRE = regexp.MustCompile(`(?i)(?:^|[^\p{L}\p{M}])(?:write|create|implement|generate|code up|give me|show me|provide|build|escribe|escriba|crea|cree|implementa|genera|écris|écrivez|ecris|crée|créez|implémente|génère|schreibe|schreib|erstelle|implementiere|scrivi|scriva|escreva|crie|implemente|schrijf|maak|implementeer|napisz|stwórz|zaimplementuj|scrie|creează|implementează|skriv|skapa|implementera|yaz|oluştur|tulis|tuliskan|buat|buatlah|viết|tạo|напиши|напишите|создай|создайте|реализуй|напишіть|створи|створіть|реалізуй|γράψε|γράψτε|δημιούργησε|اكتب|أنشئ|بنویس|כתוב|כתבי|כתבו|लिखें|लिखो|बनाएं|बनाओ)(?:$|[^\p{L}\p{M}])|লিখ|เขียน|書いて|書け|作成して|実装して|작성해|짜줘|만들어|写|编写|实现`)
	// code words: asking to write one of these is asking for code.
	codeNounRE = regexp.MustCompile(`(?i)\b(?:snippets?|regex(?:es)?|code)\b|\b(?:function|method|script|program|class)\s+(?:that|which|to|called|named)\b|(?:^|[^\p{L}])(?:código|codice|kod|kode|код|κώδικα|كود|کد|קוד|कोड|কোড)|โค้ด|ฟังก์ชัน|関数|コード|スクリプト|함수|코드|스크립트|函数|代码|脚本`)
	// nouns that ask for code only beside a programming language's name.
	codeWeakRE = regexp.MustCompile(`(?i)\b(?:functions?|methods?|scripts?|programs?|class(?:es)?|query|queries|module|algorithm|struct|endpoint)\b|(?:^|[^\p{L}])(?:función|funcion|programa|fonction|programme|funktion|skript|programm|funzione|função|funcao|functie|funkcj|funcți|fonksiyon|fungsi|hàm|функци|скрипт|программ|програм|συνάρτηση|دالة|تابع|פונקציה|फ़ंक्शन|फंक्शन|ফাংশন)|程序`)
	progLangRE = regexp.MustCompile(`\bGo\b|(?i)\b(?:python|javascript|typescript|golang|rust|java|kotlin|swift|ruby|php|sql|bash|haskell|scala|perl|lua|c\+\+|c#|node\.?js)\b`)
	// "code" that is not program code.
	notCodeRE = regexp.MustCompile(`(?i)\b(?:zip|postal|post|area|country|dress|promo|discount|coupon|morse|qr|bar|access|verification|security|error|status|color|colour|secret)\s+codes?\b|\bcodes?\s+of\s+(?:conduct|practice|ethics|honou?r)\b`)
)

var codeRequestGuards = []string{"function", "script", "program", "snippet", "code", "regex", "implement", "class", "method", "query",
	"módul", "funci", "fonction", "funktion", "skript", "funzione", "codice", "função", "funcao", "functie", "funkcj", "funcți",
	"fonksiyon", "fungsi", "kode", "hàm", "функци", "скрипт", "програм", "συνάρτηση", "κώδικα", "دالة", "تابع", "کد", "פונקציה",
	"קוד", "फ़ंक्शन", "फंक्शन", "कोड", "ফাংশন", "ฟังก์ชัน", "โค้ด", "関数", "コード", "スクリプト", "함수", "코드", "스크립트", "函数", "代码", "脚本", "程序"}

func codeRequestRule(c *compiler) {
	for _, o := range c.out {
		if o.Name == "code_only" {
			return // code only asks for code already
		}
	}
	for _, sent := range sentenceSpans(c.orig) {
		s := c.orig[sent[0]:sent[1]]
		if !codeVerbRE.MatchString(s) {
			continue
		}
		t := notCodeRE.ReplaceAllString(s, "")
		if codeNounRE.MatchString(t) || codeWeakRE.MatchString(t) && progLangRE.MatchString(t) {
			c.add("has_code", map[string]any{}, strings.TrimSpace(s))
			return
		}
	}
}

// sentenceSpans splits text at sentence ends (. ! ? and their CJK forms,
// a line break).
func sentenceSpans(text string) [][2]int {
	var out [][2]int
	start := 0
	for i, r := range text {
		switch r {
		case '.', '!', '?', '\n', '。', '！', '？':
			if i > start {
				out = append(out, [2]int{start, i})
			}
			start = i + len(string(r))
		}
	}
	if start < len(text) {
		out = append(out, [2]int{start, len(text)})
	}
	return out
}

func langPhraseGuards() []string {
	var out []string
	for _, p := range langPhrases {
		out = append(out, p.guard...)
	}
	return out
}

// Scores texts with one npm guard package, one JSON line in, one out:
//   in:  {"text": "..."}
//   out: {"score": <number>, "flag": <bool>} or {"error": "..."}
// Written by aegis eval --peers into the peers' cache directory.
import readline from "node:readline";

const name = process.argv[2];
let judge;
if (name === "llm_guardrail") {
	const g = await import("llm_guardrail");
	// The package's default check (its prompt-injection model).
	judge = async (text) => {
		const r = await g.check(text);
		return { score: r.confidence, flag: r.detected };
	};
} else if (name === "llm_guardrail-all") {
	const g = await import("llm_guardrail");
	// The package's combined check: injection, jailbreak and malicious
	// models; it allows a text only when all three do.
	judge = async (text) => {
		const r = await g.checkAll(text);
		const p = Math.max(r.injection.confidence, r.jailbreak.confidence, r.malicious.confidence);
		return { score: p, flag: !r.allowed };
	};
} else if (name === "vard") {
	const v = (await import("@andersmyrmel/vard")).default;
	// The zero-configuration check; the score is the highest severity of
	// the threats it reports (0 when it reports none).
	judge = async (text) => {
		const r = v.safe(text);
		if (r.safe) return { score: 0, flag: false };
		const s = Math.max(0, ...(r.threats || []).map((t) => t.severity || 0));
		return { score: s, flag: true };
	};
} else {
	console.error(`unknown peer ${name}`);
	process.exit(2);
}
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
	let out;
	try {
		out = await judge(JSON.parse(line).text);
	} catch (e) {
		out = { error: String((e && e.message) || e) };
	}
	process.stdout.write(JSON.stringify(out) + "\n");
}

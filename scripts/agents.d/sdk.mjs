// sdk.mjs AGENT_URL REASONING_URL: asks the same questions with the Anthropic TypeScript SDK
// (Messages) and the openai SDK's Responses API, whole and streamed, and prints one JSON object:
// case name -> what the SDK handed the program ({"text", "thinking"} or {"error"}). scripts/agents
// runs it against llama-server directly and through Aegis and compares the two objects.
// AGENT_URL serves model "stories", REASONING_URL model "stories-reasoning" (through Aegis both
// are Aegis, which routes by model).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const [agentURL, reasoningURL] = process.argv.slice(2);
const question = 'Once upon a time';
const system = 'You tell short stories.';
const anthropic = (base) => new Anthropic({ baseURL: base, apiKey: 'sk-aegis-test', maxRetries: 0, timeout: 600_000 });
const openai = (base) => new OpenAI({ baseURL: base + '/v1', apiKey: 'sk-aegis-test', maxRetries: 0, timeout: 600_000 });

function fromMessage(msg) {
	const out = { text: '', thinking: '', stop: msg.stop_reason };
	for (const b of msg.content) {
		if (b.type === 'text') out.text += b.text;
		else if (b.type === 'thinking') out.thinking += b.thinking;
		else out.other = (out.other || '') + b.type + ' ';
	}
	return out;
}

function fromResponse(resp) {
	// output_text is the SDK's own sum of the message items, set on whole answers only.
	const out = { text: '', thinking: '', status: resp.status };
	for (const item of resp.output) {
		if (item.type === 'reasoning') for (const c of item.content || []) out.thinking += c.text;
		else if (item.type === 'message') for (const c of item.content || []) out.text += c.type === 'output_text' ? c.text : '';
		else out.other = (out.other || '') + item.type + ' ';
	}
	if (resp.output_text !== undefined && resp.output_text !== out.text) throw new Error(`output_text ${JSON.stringify(resp.output_text)} is not the message items' text ${JSON.stringify(out.text)}`);
	return out;
}

const cases = {
	'anthropic-sdk/messages': async () =>
		fromMessage(await anthropic(agentURL).messages.create({ model: 'stories', max_tokens: 400, system, messages: [{ role: 'user', content: question }] })),
	'anthropic-sdk/messages stream': async () => {
		const stream = anthropic(agentURL).messages.stream({ model: 'stories', max_tokens: 400, system, messages: [{ role: 'user', content: question }] });
		let deltas = '';
		stream.on('text', (t) => { deltas += t; });
		const out = fromMessage(await stream.finalMessage());
		if (deltas !== out.text) throw new Error(`text deltas ${JSON.stringify(deltas)} differ from the final message ${JSON.stringify(out.text)}`);
		return out;
	},
	'anthropic-sdk/thinking': async () =>
		fromMessage(await anthropic(reasoningURL).messages.create({ model: 'stories-reasoning', max_tokens: 400, system, messages: [{ role: 'user', content: question }] })),
	'anthropic-sdk/thinking stream': async () => {
		const stream = anthropic(reasoningURL).messages.stream({ model: 'stories-reasoning', max_tokens: 400, system, messages: [{ role: 'user', content: question }] });
		let thinking = '';
		stream.on('thinking', (t) => { thinking += t; });
		const out = fromMessage(await stream.finalMessage());
		if (thinking !== out.thinking) throw new Error(`thinking deltas ${JSON.stringify(thinking)} differ from the final message ${JSON.stringify(out.thinking)}`);
		return out;
	},
	'openai-responses/text': async () =>
		fromResponse(await openai(agentURL).responses.create({ model: 'stories', instructions: system, input: question, max_output_tokens: 400 })),
	'openai-responses/text stream': async () => {
		const stream = await openai(agentURL).responses.create({ model: 'stories', instructions: system, input: question, max_output_tokens: 400, stream: true });
		let deltas = '';
		let final;
		for await (const ev of stream) {
			if (ev.type === 'response.output_text.delta') deltas += ev.delta;
			if (ev.type === 'response.completed') final = ev.response;
			if (ev.type === 'response.failed' || ev.type === 'error') throw new Error(`${ev.type}: ${JSON.stringify(ev)}`);
		}
		if (!final) throw new Error('the stream ended without response.completed');
		const out = fromResponse(final);
		if (deltas !== out.text) throw new Error(`text deltas ${JSON.stringify(deltas)} differ from response.completed ${JSON.stringify(out.text)}`);
		return out;
	},
	'openai-responses/reasoning': async () =>
		fromResponse(await openai(reasoningURL).responses.create({ model: 'stories-reasoning', instructions: system, input: question, max_output_tokens: 400 })),
	'openai-responses/reasoning stream': async () => {
		const stream = await openai(reasoningURL).responses.create({ model: 'stories-reasoning', instructions: system, input: question, max_output_tokens: 400, stream: true });
		let reasoning = '';
		let text = '';
		let final;
		for await (const ev of stream) {
			if (ev.type === 'response.reasoning_text.delta') reasoning += ev.delta;
			if (ev.type === 'response.output_text.delta') text += ev.delta;
			if (ev.type === 'response.completed') final = ev.response;
			if (ev.type === 'response.failed' || ev.type === 'error') throw new Error(`${ev.type}: ${JSON.stringify(ev)}`);
		}
		if (!final) throw new Error('the stream ended without response.completed');
		const out = fromResponse(final);
		if (reasoning !== out.thinking || text !== out.text) throw new Error(`deltas (${JSON.stringify(reasoning)}, ${JSON.stringify(text)}) differ from response.completed (${JSON.stringify(out.thinking)}, ${JSON.stringify(out.text)})`);
		return out;
	},
};

const results = {};
for (const [name, run] of Object.entries(cases)) {
	try {
		results[name] = await run();
	} catch (e) {
		results[name] = { error: String(e && e.message ? e.message : e).slice(0, 500) };
	}
}
console.log(JSON.stringify(results, null, 1));

// slow.mjs: a pacing proxy for the keep-alive checks. It forwards every
// request to the upstream named by its one argument and passes the answer
// on one event (Server-Sent Events) or line at a time with PACE_MS
// (default 25) of silence between them, so a gateway that holds the
// answer meets silences far longer than its keep-alive interval however
// fast the model is.
// It prints "listening on http://127.0.0.1:PORT" once it accepts requests.
import http from "node:http";

const target = new URL(process.argv[2]);
const pace = Number(process.env.PACE_MS || 25);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const server = http.createServer((req, res) => {
  const up = http.request(
    { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } },
    async (ur) => {
      const headers = { ...ur.headers };
      delete headers["content-length"]; // the body is re-sent in pieces
      res.writeHead(ur.statusCode, headers);
      // A fast model's whole answer can come in one read, so the pieces
      // are the stream's own: events (a blank line ends each) or lines.
      const sep = Buffer.from(/event-stream/.test(ur.headers["content-type"] || "") ? "\n\n" : "\n");
      let buf = Buffer.alloc(0);
      for await (const piece of ur) {
        buf = Buffer.concat([buf, piece]);
        for (let i; (i = buf.indexOf(sep)) >= 0; ) {
          res.write(buf.subarray(0, i + sep.length));
          buf = buf.subarray(i + sep.length);
          await sleep(pace);
        }
      }
      res.end(buf);
    },
  );
  up.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(`slow.mjs: ${e.message}\n`);
  });
  req.pipe(up);
});
server.listen(0, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${server.address().port}`));

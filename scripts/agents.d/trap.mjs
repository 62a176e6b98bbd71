// trap.mjs LOG: an HTTP proxy that forwards nothing. The agents run with HTTPS_PROXY, HTTP_PROXY and
// ALL_PROXY pointing here (NO_PROXY covers loopback), so any request they try to make to the outside
// world arrives here instead, is refused and is written to LOG, one line each. scripts/agents fails
// when LOG is not empty. Prints "listening on http://127.0.0.1:PORT".
import fs from 'node:fs';
import http from 'node:http';

const log = process.argv[2];
const note = (what) => fs.appendFileSync(log, what + '\n');
const srv = http.createServer((req, res) => {
	note(`${req.method} ${req.url}`);
	res.writeHead(403, { 'content-type': 'text/plain' });
	res.end('no outside traffic from the agents under test\n');
});
srv.on('connect', (req, sock) => {
	note(`CONNECT ${req.url}`);
	sock.end('HTTP/1.1 403 Forbidden\r\n\r\n');
});
srv.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${srv.address().port}`));

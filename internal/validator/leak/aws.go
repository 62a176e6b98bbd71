package leak

// The line holds of the context rules, kept to where a credential can
// still begin: an AWS secret key is a run of exactly 40 key characters
// within a short window after a word "aws" (AWS_SECRET_ACCESS_KEY, "AWS
// secret key: ..."), and an assigned password ends at its closing quote.
// Each is judged as soon as its value can no longer grow, so the text
// after it is not held to the end of the line.

// awsWindow bounds how far after "aws" its secret key may end: the line
// rule allows 20 bytes to "secret"/"sk", 20 more and 40 separators before
// the 40-byte key.
const awsWindow = 3 + 20 + 6 + 20 + 40 + 40

// awsKeyLen is the length of an AWS secret access key.
const awsKeyLen = 40

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// isKeyByte reports whether c can be part of an AWS secret key.
func isKeyByte(c byte) bool { return isAlnum(c) || c == '/' || c == '+' || c == '=' }

// awsOpen opens the window after a word "aws" ending at offset at.
func (d *Detector) awsOpen(at int) {
	d.awsSeen, d.awsAt, d.awsRun = true, at+1, -1
	d.awsFrom = max(0, len(d.line)-3)
}

// awsByte follows the runs of key characters in the window; at the end of
// each run it judges the window's text, so a key is reported before the
// byte after it is released.
func (d *Detector) awsByte(c byte, at int) {
	if d.awsAt < 0 || at < d.awsAt {
		return
	}
	if isKeyByte(c) {
		if d.awsRun < 0 {
			d.awsRun = at
		}
		return
	}
	if d.awsRun >= 0 {
		d.awsRun = -1
		d.judgeLine(d.awsFrom, 1)
	}
	if at-d.awsAt > awsWindow {
		d.awsAt = -1
	}
}

// awsHeld returns where the window holds the text: the start of a run
// that may still become a key, else -1.
func (d *Detector) awsHeld() int {
	if d.awsAt < 0 || d.awsRun < 0 || d.off-d.awsRun > awsKeyLen {
		return -1
	}
	return d.awsRun
}

// quoteClosed judges a quoted assignment value at its closing quote.
func (d *Detector) quoteClosed() {
	d.quoteHold = -1
	d.judgeLine(0, 2)
}

// judgeLine applies line rule i to the line from index from and reports
// what it finds.
func (d *Detector) judgeLine(from, rule int) {
	if from >= len(d.line) {
		return
	}
	line := string(d.line[from:])
	d.scratch = scanLine(line, false, rule == 1, rule == 2, d.scratch[:0])
	for _, m := range d.scratch {
		d.reportCred(d.lineStart+from+m.start, d.lineStart+from+m.end, m.kind, line[m.start:m.end])
	}
}

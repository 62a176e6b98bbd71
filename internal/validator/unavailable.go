package validator

// Unavailable returns the check that stands in for a guard that cannot
// judge at all (its model did not load, its server is not serving): it
// reports the whole output with a guard_unavailable finding from the
// first byte, and, as req's policy says (ReleasesUnjudged), lets the text
// go with that finding as a note or holds it for the finding to fail.
func Unavailable(check, msg string, req *Request) Validator {
	return &unavailable{check: check, msg: msg, release: req.ReleasesUnjudged(false)}
}

type unavailable struct {
	check, msg string
	release    bool
	n          int
}

func (u *unavailable) Name() string                { return u.check }
func (u *unavailable) Write(p []byte) (int, error) { u.n += len(p); return len(p), nil }
func (u *unavailable) Close()                      {}

func (u *unavailable) Settled() int {
	if u.release {
		return u.n
	}
	return 0
}

func (u *unavailable) Findings() []Finding {
	return []Finding{{Check: u.check, Reason: ReasonGuardUnavailable, Start: 0, End: max(1, u.n), Message: u.msg}}
}

package pipeline

// Regression bounds for TestCorpus, set from the figures measured when the
// checks were merged (see the test log for per-reason precision/recall).
// The known misses: two repetition loops without word boundaries
// ("hahaha..." and an emoji run) and one secret marked only by "do not
// disclose it" in the system prompt.
const (
	maxFalseAlarms = 0
	maxMissed      = 3
)

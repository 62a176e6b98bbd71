package gateway

import "encoding/json"

// choiceOpt makes a releaser write one choice of a streamed n-choice
// answer (choices_stream.go): each of its chunks carries the choice's
// index and the stream's one id (the first choice's), the stream's header
// goes out once, its end marker is left to the last choice, and an error
// after the stream began goes out as an event.
type choiceOpt struct {
	index  int
	stream *sharedStream
}

// sharedStream is the client's stream the choices share.
type sharedStream struct {
	started bool   // its header went out
	id      string // the first choice's id
}

// restamp returns the chunk p with the choice's index on each of its
// choices and the stream's id. Other payloads (an error) are unchanged.
func (o *choiceOpt) restamp(p []byte) []byte {
	var m rawBody
	if json.Unmarshal(p, &m) != nil || m == nil {
		return p
	}
	if _, ok := m["choices"]; !ok {
		return p
	}
	var choices []rawBody
	json.Unmarshal(m["choices"], &choices)
	for _, ch := range choices {
		ch.set("index", o.index)
	}
	m.set("choices", choices)
	var id string
	if json.Unmarshal(m["id"], &id) == nil && id != "" {
		if o.stream.id == "" {
			o.stream.id = id
		}
		m.set("id", o.stream.id)
	}
	return m.encode()
}

package validator

import (
	"reflect"
	"testing"
)

func TestUniqueFindings(t *testing.T) {
	syn := Finding{Check: "json_syntax", Reason: ReasonInvalidJSON, Start: 4, End: 5, Message: "unexpected 'x'"}
	schema := Finding{Check: "json_schema", Reason: ReasonInvalidJSON, Start: 4, End: 5, Message: "not JSON"}
	other := Finding{Check: "json_schema", Reason: ReasonSchemaViolation, Start: 0, End: 9, Path: "/a"}
	note := Finding{Check: "guard", Message: "score 0.1"}
	for _, tc := range []struct {
		name string
		in   []Finding
		want []Finding
	}{
		{"nil", nil, nil},
		{"no repeats", []Finding{syn, other, note}, []Finding{syn, other, note}},
		{"same finding twice", []Finding{syn, syn}, []Finding{syn}},
		{"two checks, one failure", []Finding{schema, syn, syn, other}, []Finding{schema, other}},
		{"notes kept unless repeated", []Finding{note, note, {Check: "guard", Message: "score 0.2"}}, []Finding{note, {Check: "guard", Message: "score 0.2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]Finding(nil), tc.in...)
			got := UniqueFindings(in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if !reflect.DeepEqual(in, tc.in) {
				t.Fatal("the input was modified")
			}
		})
	}
}

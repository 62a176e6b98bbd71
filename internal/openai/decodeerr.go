package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// DecodeError rewrites an encoding/json error from decoding a request in
// the API's words: the field and the JSON kind it wants, never the Go
// struct and type names ("max_tokens: want a number, got a string").
func DecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Errorf("%s: want %s, got %s", field, jsonKind(te.Type), article(te.Value))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON at byte %d: %s", se.Offset, se.Error())
	}
	return err
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

// article puts "a" or "an" before a JSON kind as encoding/json names it
// ("string", "number", "number -1", "object", "array", "bool").
func article(v string) string {
	switch {
	case v == "object", v == "array":
		return "an " + v
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number"):
		return "a number"
	case v == "":
		return "another kind of value"
	}
	return "a " + v
}

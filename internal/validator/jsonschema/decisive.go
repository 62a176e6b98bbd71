package jsonschema

import (
	js "github.com/santhosh-tekuri/jsonschema/v6"
)

// decisive reports whether s and every subschema the tracker follows use
// only keywords that the tracker checks completely: type, enum and const
// with scalar values, properties, patternProperties,
// additionalProperties, required, min/maxProperties, items, prefixItems,
// additionalItems, min/maxItems, minLength, maxLength, pattern, minimum,
// maximum, exclusiveMinimum, exclusiveMaximum, $ref and allOf, plus
// annotations. Anything else (anyOf, oneOf, not, if, dependencies,
// unevaluated*, uniqueItems, contains, multipleOf, format, content,
// dynamic refs, vocabulary extensions) makes it not decisive, and the
// full validator runs at Close.
//
// This matters for speed: the strict structured-output schemas that
// OpenAI-style clients send are decisive, and for them the document is
// judged entirely while it streams, with no second parse at the end.
func decisive(s *js.Schema, seen map[*js.Schema]bool) bool {
	if s == nil || seen[s] {
		return true
	}
	seen[s] = true
	if s.Bool != nil {
		return true
	}
	if s.RecursiveRef != nil || s.DynamicRef != nil || s.RecursiveAnchor || s.DynamicAnchor != "" ||
		s.Not != nil || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.If != nil || s.Then != nil || s.Else != nil ||
		s.Format != nil || s.PropertyNames != nil || len(s.Dependencies) > 0 || len(s.DependentRequired) > 0 ||
		len(s.DependentSchemas) > 0 || s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil ||
		s.UniqueItems || s.Contains != nil || s.MinContains != nil || s.MaxContains != nil ||
		s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil ||
		s.MultipleOf != nil || len(s.Extensions) > 0 {
		return false
	}
	if s.Enum != nil {
		for _, v := range s.Enum.Values {
			if !scalar(v) {
				return false
			}
		}
	}
	if s.Const != nil && !scalar(*s.Const) {
		return false
	}
	subs := followed(s)
	for _, sub := range subs {
		if !decisive(sub, seen) {
			return false
		}
	}
	return true
}

func scalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// followed returns the subschemas the tracker may descend into from s.
func followed(s *js.Schema) []*js.Schema {
	subs := []*js.Schema{s.Ref, s.Items2020}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.PrefixItems...)
	for _, p := range s.Properties {
		subs = append(subs, p)
	}
	for _, p := range s.PatternProperties {
		subs = append(subs, p)
	}
	if ap, ok := s.AdditionalProperties.(*js.Schema); ok {
		subs = append(subs, ap)
	}
	switch it := s.Items.(type) {
	case *js.Schema:
		subs = append(subs, it)
	case []*js.Schema:
		subs = append(subs, it...)
	}
	if ai, ok := s.AdditionalItems.(*js.Schema); ok {
		subs = append(subs, ai)
	}
	return subs
}

package policy

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// What happens to text a guard could not judge (its model did not load,
// its server or workers did not answer, its verdict came after the
// deadline) has one rule: the policy's action for guard_unavailable. Every
// guard reports such text with a guard_unavailable finding; release (the
// default) lets it go with the finding kept as a note in the verdict,
// halt holds it and stops the response. fail_open, wherever a guard's
// configuration takes it (the guard section, a guard check, serve's
// guard_server), is a shorthand for that rule: true is release, false is
// halt. Two settings that disagree are an error naming both.

// unjudgedRule is where the rule for guard_unavailable was set, when it
// was: the actions section or a fail_open shorthand.
type unjudgedRule struct {
	open  bool
	where string
}

// failOpenKey returns the fail_open member of the mapping n, when it has
// one.
func failOpenKey(n *yaml.Node) (open bool, line int, ok bool, err error) {
	if n == nil || n.Kind != yaml.MappingNode {
		return false, 0, false, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != "fail_open" {
			continue
		}
		v := n.Content[i+1]
		if err := v.Decode(&open); err != nil {
			return false, v.Line, false, fmt.Errorf("line %d: fail_open: want true or false", v.Line)
		}
		return open, v.Line, true, nil
	}
	return false, 0, false, nil
}

// setUnjudged applies one setting of the rule for guard_unavailable.
func (p *Policy) setUnjudged(open bool, where string) error {
	if p.unjudged != nil && p.unjudged.open != open {
		return fmt.Errorf("%s (%s) contradicts %s (%s): the rule for guard_unavailable is set once",
			where, unjudgedWord(open), p.unjudged.where, unjudgedWord(p.unjudged.open))
	}
	rules := make(map[validator.Reason]Rule, len(p.Rules))
	for k, v := range p.Rules {
		rules[k] = v
	}
	r := p.Rule(validator.ReasonGuardUnavailable)
	r.Action = validator.ActionHalt
	if open {
		r.Action = validator.ActionRelease
	}
	rules[validator.ReasonGuardUnavailable] = r
	p.Rules = rules
	p.unjudged = &unjudgedRule{open: open, where: where}
	return nil
}

func unjudgedWord(open bool) string {
	if open {
		return "release"
	}
	return "halt"
}

// WithFailOpen returns a copy of p whose rule for guard_unavailable is
// release (open) or halt, for a fail_open given outside the policy file
// (where names it, as in an error). It is an error when the policy sets
// the rule otherwise.
func (p *Policy) WithFailOpen(open bool, where string) (*Policy, error) {
	q := *p
	if err := q.setUnjudged(open, where); err != nil {
		return nil, fmt.Errorf("policy %s: %w", p.Source, err)
	}
	return &q, nil
}

// failOpenShorthands applies the fail_open keys of the checks section and
// of the guard section before the actions section is read.
func (p *Policy) failOpenShorthands(checks, guard *yaml.Node) error {
	if checks.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(checks.Content); i += 2 {
			open, line, ok, err := failOpenKey(checks.Content[i+1])
			if err != nil {
				return fmt.Errorf("check %s: %w", checks.Content[i].Value, err)
			}
			if ok {
				if err := p.setUnjudged(open, fmt.Sprintf("line %d: checks.%s.fail_open", line, checks.Content[i].Value)); err != nil {
					return err
				}
			}
		}
	}
	open, line, ok, err := failOpenKey(guard)
	if err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	if ok {
		return p.setUnjudged(open, fmt.Sprintf("line %d: guard.fail_open", line))
	}
	return nil
}

// actionsUnjudged checks an action for guard_unavailable in the actions
// section against a fail_open shorthand, and records it.
func (p *Policy) actionsUnjudged(line int) error {
	a := p.Rule(validator.ReasonGuardUnavailable).Action
	open := a == validator.ActionRelease
	where := fmt.Sprintf("line %d: actions.guard_unavailable", line)
	if p.unjudged != nil && p.unjudged.open != open {
		return fmt.Errorf("%s (%s) contradicts %s (%s): the rule for guard_unavailable is set once",
			where, a, p.unjudged.where, unjudgedWord(p.unjudged.open))
	}
	p.unjudged = &unjudgedRule{open: open, where: where}
	return nil
}

package toolpolicy

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// compiled is a rule with its program.
type compiled struct {
	Rule
	prg cel.Program
}

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error

	// programs caches compiled expressions: a policy's rules are compiled
	// once, not per attempt. Programs are safe for concurrent use.
	programs sync.Map // string -> cel.Program
)

func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable("args", cel.DynType),
			cel.Variable("tool", cel.StringType),
			cel.Variable("messages", cel.ListType(cel.DynType)),
			cel.Variable("tools", cel.ListType(cel.DynType)),
		)
	})
	return env, envErr
}

// maxCost bounds the work one rule may do on one call.
const maxCost = 1_000_000

func compile(expr string) (cel.Program, error) {
	if p, ok := programs.Load(expr); ok {
		return p.(cel.Program), nil
	}
	e, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("expr %q: %w", expr, iss.Err())
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, fmt.Errorf("expr %q: want a bool, it gives %s", expr, ast.OutputType())
	}
	p, err := e.Program(ast, cel.CostLimit(maxCost))
	if err != nil {
		return nil, fmt.Errorf("expr %q: %w", expr, err)
	}
	programs.Store(expr, p)
	return p, nil
}

func (c compiled) eval(tool string, args any, req *validator.Request) (bool, error) {
	if args == nil {
		args = map[string]any{}
	}
	msgs := make([]any, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content, "name": m.Name, "tool_call_id": m.ToolCallID}
	}
	tools := make([]any, len(req.Tools))
	for i, t := range req.Tools {
		tools[i] = map[string]any{"name": t.Name, "description": t.Description}
	}
	out, _, err := c.prg.Eval(map[string]any{"args": args, "tool": tool, "messages": msgs, "tools": tools})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the rule gave %v, not a bool", out.Value())
	}
	return b, nil
}

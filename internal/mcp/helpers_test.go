package mcp

import (
	"errors"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

type (
	validatorToolCall = validator.ToolCall
	validatorVerdict  = validator.Verdict
)

func findingOf(check, reason, msg string) validator.Finding {
	return validator.Finding{Check: check, Reason: validator.Reason(reason), Message: msg}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

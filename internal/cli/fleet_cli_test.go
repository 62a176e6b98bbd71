package cli

import (
	"strings"
	"testing"
)

func TestFleetCommandsUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"worker needs nats", []string{"guard-worker", "--model", "x.gguf"}, "needs --nats"},
		{"worker needs one source", []string{"guard-worker", "--nats", "nats://127.0.0.1:1"}, "exactly one of --model"},
		{"worker with both sources", []string{"guard-worker", "--nats", "nats://127.0.0.1:1", "--model", "x.gguf", "--guard-url", "http://127.0.0.1:1"}, "exactly one of --model"},
		{"fronting needs a name", []string{"guard-worker", "--nats", "nats://127.0.0.1:1", "--guard-url", "http://127.0.0.1:1"}, "--model-name"},
		{"bad kind", []string{"guard-worker", "--nats", "nats://127.0.0.1:1", "--guard-url", "http://127.0.0.1:1", "--model-name", "m", "--kind", "vllm"}, "unknown guard server kind"},
		{"fleet needs nats", []string{"fleet"}, "needs --nats"},
		{"workers need nats", []string{"serve", "--upstream", "http://127.0.0.1:1", "--kind", "llama-server", "--guard-workers", "m", "--listen", "127.0.0.1:0", "--incidents-db", "INCIDENTS"}, "--guard-workers needs --nats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			for i, a := range args {
				if a == "INCIDENTS" {
					args[i] = t.TempDir() + "/i.db"
				}
			}
			code, _, errOut := run(args...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, ExitUsage, tc.want)
			}
		})
	}
}

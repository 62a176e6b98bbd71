package sweep

import (
	"encoding/json"
	"fmt"
)

// BenchRow is one llama-bench result (-o json); unknown fields are ignored,
// since llama-bench generates its schema at runtime and adds fields.
type BenchRow struct {
	BuildCommit  string  `json:"build_commit"`
	BuildNumber  int     `json:"build_number"`
	Backends     string  `json:"backends"`
	ModelSize    uint64  `json:"model_size"`
	ModelNParams uint64  `json:"model_n_params"`
	NGPULayers   int     `json:"n_gpu_layers"`
	SplitMode    string  `json:"split_mode"`
	Devices      string  `json:"devices"`
	TypeK        string  `json:"type_k"`
	TypeV        string  `json:"type_v"`
	NPrompt      int     `json:"n_prompt"`
	NGen         int     `json:"n_gen"`
	NDepth       int     `json:"n_depth"`
	AvgNs        float64 `json:"avg_ns"`
	AvgTs        float64 `json:"avg_ts"`
	StddevTs     float64 `json:"stddev_ts"`
}

// maxBenchRows bounds the rows accepted from one llama-bench run.
const maxBenchRows = 10000

// ParseBenchJSON parses llama-bench -o json output: an array of rows.
func ParseBenchJSON(b []byte) ([]BenchRow, error) {
	var rows []BenchRow
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("sweep: llama-bench JSON: %w", err)
	}
	if len(rows) > maxBenchRows {
		return nil, fmt.Errorf("sweep: llama-bench JSON: %d rows (max %d)", len(rows), maxBenchRows)
	}
	return rows, nil
}

// Speeds picks prompt processing (n_gen = 0) and generation (n_prompt = 0)
// tokens per second from rows; a pp test has n_gen 0 and a tg test
// n_prompt 0 (llama-bench README).
func Speeds(rows []BenchRow) (pp, tg float64, ppTokens int) {
	for _, r := range rows {
		switch {
		case r.NGen == 0 && r.NPrompt > 0 && pp == 0:
			pp, ppTokens = r.AvgTs, r.NPrompt
		case r.NPrompt == 0 && r.NGen > 0 && tg == 0:
			tg = r.AvgTs
		}
	}
	return pp, tg, ppTokens
}

package view

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// TestAreaHeaderBudget: under --max-cost the status area's header shows
// the run's spend against the cap; without it, the spend alone.
func TestAreaHeaderBudget(t *testing.T) {
	for _, tc := range []struct {
		maxCost float64
		want    string
	}{{0.005, "· $0.0031 of $0.0050"}, {0, "· $0.0031"}} {
		b := event.New(func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
		b.Publish(&event.Start{Recipe: "/w/fan.star", MaxCost: tc.maxCost})
		result, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "total_cost_usd": 0.003075})
		b.Publish(&event.Agent{Session: "s1", Dir: "in", Message: result})
		b.Publish(&event.Agent{Session: "s1", Dir: "out", Message: json.RawMessage(`{"type":"user"}`)})
		out, _ := renderArea(nil, b.State(), time.Date(2026, 1, 2, 3, 4, 9, 0, time.UTC), 100, 10, false)
		header, _, _ := strings.Cut(ansi.Strip(string(out)), "\n")
		if !strings.Contains(header, tc.want) || tc.maxCost == 0 && strings.Contains(header, " of ") {
			t.Errorf("max cost %v: header %q, want %q", tc.maxCost, header, tc.want)
		}
	}
}

package runtime

import (
	"fmt"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view"
)

// Budget is what a run's agent sessions spent and, with sous run
// --max-cost USD, the cap on it (RECIPES.md, "Fan-out, retries, budgets").
// What was spent is the run's cost as its events tell it (event.State:
// every session's turns, each result's cost_usd). Once the spend reaches
// the cap, the cap is exceeded for good: the builtins refuse new turns,
// the callbacks given to OnExceeded stop the running ones, and the run
// fails with a *BudgetError. Safe for concurrent use; a nil *Budget has
// spent nothing and has no cap.
type Budget struct {
	limit float64 // 0: no cap

	mu       sync.Mutex
	spent    float64
	exceeded bool
	hooks    []func()
}

// NewBudget returns a budget with a cap of limit dollars (0: none).
func NewBudget(limit float64) *Budget { return &Budget{limit: limit} }

// Limit is the cap in dollars, 0 when there is none.
func (b *Budget) Limit() float64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Spent is what the run's sessions have cost so far, in dollars.
func (b *Budget) Spent() float64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

// Remaining is what may still be spent: ok is false when there is no cap.
func (b *Budget) Remaining() (usd float64, ok bool) {
	if b == nil || b.limit == 0 {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.limit-b.spent, 0), true
}

// Err is a *BudgetError once the spend has reached the cap, else nil.
func (b *Budget) Err() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.exceeded {
		return nil
	}
	return &BudgetError{Spent: b.spent, Limit: b.limit}
}

// OnExceeded has f called once, on a goroutine of its own, when the spend
// reaches the cap (at once if it has). f must not block for long: it
// stops what spends (interrupts turns), it does not wait for it.
func (b *Budget) OnExceeded(f func()) {
	if b == nil {
		return
	}
	b.mu.Lock()
	exceeded := b.exceeded
	if !exceeded {
		b.hooks = append(b.hooks, f)
	}
	b.mu.Unlock()
	if exceeded {
		go f()
	}
}

// note records the run's spend so far; the first time it reaches the cap,
// the hooks run.
func (b *Budget) note(spent float64) {
	b.mu.Lock()
	b.spent = spent
	var hooks []func()
	if b.limit > 0 && !b.exceeded && spent >= b.limit {
		b.exceeded = true
		hooks, b.hooks = b.hooks, nil
	}
	b.mu.Unlock()
	for _, f := range hooks {
		go f()
	}
}

// BudgetError says the run spent its --max-cost.
type BudgetError struct {
	Spent, Limit float64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("budget exceeded: the run's agent sessions spent %s of its --max-cost %s", view.Cost(e.Spent), view.Cost(e.Limit))
}

// budgetSink keeps a Budget up to date with the run's cost: the bus's
// State adds up each result's cost before the sinks see the event.
type budgetSink struct {
	budget *Budget
	state  *event.State
	last   float64
}

// Handle implements event.Sink. It only reads the State (a field) on
// agent messages, and tells the budget when the cost moved.
func (s *budgetSink) Handle(_ time.Time, e event.Event) {
	if _, ok := e.(*event.Agent); !ok {
		return
	}
	if c := s.state.Cost(); c != s.last {
		s.last = c
		s.budget.note(c)
	}
}

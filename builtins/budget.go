package builtins

import (
	"errors"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent"
)

func budgetEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "budget", Sig: "budget() -> struct(spent, limit)",
			Doc: "What the run's agent sessions have cost so far and its cap: spent is in dollars (a float: the turns' " +
				"cost_usd added up across every session), limit the `sous run --max-cost USD` (a float; None without the " +
				"flag). Once spent reaches limit, the running turns are interrupted, new turns are refused (send, start, " +
				"sdk.send, sdk.session fail naming what was spent) and the run fails saying what was spent; each session's " +
				"CLI is started with --max-budget-usd at most what remains, so a lone turn stops in its tracks too.",
			Fn: budgetValue},
	}
}

func budgetValue(c *runtime.Call) (starlark.Value, error) {
	if err := bind(c, 0); err != nil {
		return nil, err
	}
	var limit starlark.Value = starlark.None
	if l := c.Env.Budget.Limit(); l > 0 {
		limit = starlark.Float(l)
	}
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"spent": starlark.Float(c.Env.Budget.Spent()),
		"limit": limit,
	}), nil
}

// capSessionBudget refuses a session once the run's --max-cost is spent,
// and otherwise caps the CLI's own --max-budget-usd at what remains: the
// CLI checks it after every model request, where sous sees a cost only
// when a turn ends, so a long turn stops near the cap rather than long
// after it.
func capSessionBudget(b *runtime.Budget, opt *agent.Options) error {
	if err := b.Err(); err != nil {
		return err
	}
	rest, ok := b.Remaining()
	if !ok {
		return nil
	}
	if opt.MaxBudgetUSD == 0 || rest < opt.MaxBudgetUSD {
		opt.MaxBudgetUSD = rest
	}
	return nil
}

// errBudgetSpent is why the turns still queued when the run's --max-cost
// was spent never start.
var errBudgetSpent = errors.New("the run's --max-cost is spent")

// stopTurns is what the run's budget does once spent (Budget.OnExceeded):
// every session's running turn is interrupted and its queued ones dropped.
func (a *agents) stopTurns() {
	a.mu.Lock()
	sessions := make([]*Session, 0, len(a.sessions))
	for s := range a.sessions {
		sessions = append(sessions, s)
	}
	a.mu.Unlock()
	for _, s := range sessions {
		s.s.StopTurns(errBudgetSpent)
	}
}

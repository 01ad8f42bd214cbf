package builtins

import (
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
)

// Pool is a set of hosts that parallel(hosts=pool) spreads its tasks
// over, at most slots at once on each. A host whose connection is lost for
// good leaves the pool for the rest of the run. Its state is touched only
// on the recipe's thread (parallel's scheduling, attribute reads).
type Pool struct {
	env     *runtime.Env
	slots   int
	members []*poolHost // in the order given; lost ones stay, marked
}

// poolHost is one host of a pool: its connection, how many of the pool's
// tasks run on it, and why it left the pool (nil while it is in).
type poolHost struct {
	host    *runtime.Host
	d       runtime.Daemon
	running int
	lost    error
}

var _ starlark.HasAttrs = (*Pool)(nil)

func (p *Pool) String() string {
	return fmt.Sprintf("<Pool %d hosts, %d slots each, %d lost>", len(p.live()), p.slots, len(p.members)-len(p.live()))
}
func (p *Pool) Type() string          { return "Pool" }
func (p *Pool) Freeze()               {} // a handle on the run's connections
func (p *Pool) Truth() starlark.Bool  { return starlark.True }
func (p *Pool) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Pool") }

func (p *Pool) Attr(name string) (starlark.Value, error) {
	return p.env.Table.Attr(p.env, "Pool", p, nil, name)
}

func (p *Pool) AttrNames() []string { return p.env.Table.AttrNames("Pool") }

// live is the hosts still in the pool, in the order given.
func (p *Pool) live() []*poolHost {
	var in []*poolHost
	for _, m := range p.members {
		if m.lost == nil {
			in = append(in, m)
		}
	}
	return in
}

// free is the host still in the pool with the fewest of the pool's tasks
// running and a slot free (the first given among equals), or nil.
func (p *Pool) free() *poolHost {
	var best *poolHost
	for _, m := range p.live() {
		if m.running < p.slots && (best == nil || m.running < best.running) {
			best = m
		}
	}
	return best
}

// gone reports why m's connection is lost for good (its client gave up
// reconnecting, or was closed), or nil while it works or is reconnecting.
func (m *poolHost) gone() error {
	if m.lost != nil {
		return m.lost
	}
	if cl := m.d.Client(); cl != nil {
		return cl.Err()
	}
	return nil
}

// lostTargets names the hosts that left the pool with why, for the error
// of a fan-out that has no host left.
func (p *Pool) lostTargets() string {
	var parts []string
	for _, m := range p.members {
		if m.lost != nil {
			parts = append(parts, m.host.Target()+" ("+m.lost.Error()+")")
		}
	}
	return strings.Join(parts, "; ")
}

func poolEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "hosts", Sig: "hosts(targets, *, slots=4, token=None) -> Pool",
			Doc: "A pool of hosts for parallel(items, fn, hosts=pool): targets is a list of host targets as host() " +
				"takes them (\"unix:///path/to.sock\", \"ssh://...\", \"ws://...\", \"embedded\") or Host values, in any " +
				"mix; each target is connected now, with token= (else $SOUS_TOKEN, else $CLAUDE_RPC_TOKEN). parallel " +
				"calls fn(item, host) and starts each task on the host with the fewest of the pool's tasks running, " +
				"at most slots at once on each host (its limit= still caps the total). A host whose connection is " +
				"lost for good (the client gave up reconnecting: SOUS_RECONNECT_TIMEOUT, 30s by default) leaves the " +
				"pool for the rest of the run, and its tasks that had not ended start again on the others: fn is " +
				"called again for them, with the new host, so a task must be safe to start twice. With no host " +
				"left, parallel fails naming each lost host and why.",
			Fn: hostsBuiltin},
		{Name: "Pool", Sig: "Pool",
			Doc: "A set of hosts from hosts(), for parallel(hosts=...). The pool is shared by every parallel call " +
				"given it: a host lost in one is out for the next."},
		{Name: "Pool.hosts", Sig: "Pool.hosts -> list of Host",
			Doc:  "The hosts still in the pool, in the order given.",
			Attr: attr(func(p *Pool) starlark.Value { return p.hostList(false) })},
		{Name: "Pool.targets", Sig: "Pool.targets -> list of string",
			Doc:  "The targets of the hosts still in the pool, as given (a Host value's own target).",
			Attr: attr(func(p *Pool) starlark.Value { return p.targetList(false) })},
		{Name: "Pool.lost", Sig: "Pool.lost -> list of string",
			Doc:  "The targets of the hosts taken out of the pool because their connection was lost for good.",
			Attr: attr(func(p *Pool) starlark.Value { return p.targetList(true) })},
		{Name: "Pool.slots", Sig: "Pool.slots -> int",
			Doc:  "How many of the pool's tasks run at once on each host at most.",
			Attr: attr(func(p *Pool) starlark.Value { return starlark.MakeInt(p.slots) })},
	}
}

// hostList is the pool's Host values, those lost or those still in.
func (p *Pool) hostList(lost bool) *starlark.List {
	var out []starlark.Value
	for _, m := range p.members {
		if (m.lost != nil) == lost {
			out = append(out, m.host)
		}
	}
	return starlark.NewList(out)
}

// targetList is the targets of the pool's hosts, those lost or those
// still in.
func (p *Pool) targetList(lost bool) *starlark.List {
	var out []starlark.Value
	for _, m := range p.members {
		if (m.lost != nil) == lost {
			out = append(out, starlark.String(m.host.Target()))
		}
	}
	return starlark.NewList(out)
}

func hostsBuiltin(c *runtime.Call) (starlark.Value, error) {
	var targets []starlark.Value
	slots := int64(4)
	var token string
	if err := bind(c, 1, req("targets", valueList(&targets)), opt("slots", integer(&slots, 1)),
		opt("token", optStr(&token))); err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, c.Errorf("targets is empty: want at least one host target or Host")
	}
	p := &Pool{env: c.Env, slots: int(slots)}
	seen := make(map[string]bool)
	for i, t := range targets {
		var h *runtime.Host
		switch t := t.(type) {
		case starlark.String:
			// The same target twice would be one daemon with twice the
			// slots: more likely a mistake than a wish.
			if seen[string(t)] {
				return nil, c.Errorf("targets[%d]: %s is given twice", i, string(t))
			}
			seen[string(t)] = true
			var err error
			if h, err = openHost(c, string(t), token); err != nil {
				return nil, err
			}
		case *runtime.Host:
			h = t
		default:
			return nil, c.Errorf("targets[%d]: want a target string or Host, got %s", i, t.Type())
		}
		d, err := hostClient(c, h)
		if err != nil {
			return nil, err
		}
		p.members = append(p.members, &poolHost{host: h, d: d})
	}
	return p, nil
}

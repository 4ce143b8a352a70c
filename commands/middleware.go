package commands

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// Every way into the service (Handle, Observe, Sweep, Home, the estimate
// refresher) is a stage behind middleware: one chain per entry point,
// built once in NewService. For inputs the chain is
//
//	logged → recovering → identify → understand → locking → authorize → audited → dispatch
//
// recovering turns a panic into a log line with a reference and, for an
// input, a private answer; identify knows the person or refuses them;
// understand parses the text or the press (refusing what is unreadable or
// invalid); locking takes the request's lock and the write section for
// inputs that change something; authorize refuses what the person may
// not do or what no longer applies to the request; audited makes sure a
// press or an action leaves an audit entry; dispatch runs the verb.
// Each refusal is audited where it happens.

// stage handles one call.
type stage func(c *call)

// middleware wraps a stage.
type middleware func(stage) stage

// chain wraps h in mws, the first outermost.
func chain(h stage, mws ...middleware) stage {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// recovering logs a panic in the rest of the chain with a reference and
// calls onPanic with it (nil: nothing more).
func (s *Service) recovering(what string, onPanic func(c *call, ref string)) middleware {
	return func(next stage) stage {
		return func(c *call) {
			defer s.recovered(c, what, func(ref string) {
				if onPanic != nil {
					onPanic(c, ref)
				}
			})
			next(c)
		}
	}
}

// recovered is recovering's deferred half, for the stages that are not
// a chain of their own.
func (s *Service) recovered(c *call, what string, onPanic func(ref string)) {
	v := recover()
	if v == nil {
		return
	}
	ref := fmt.Sprintf("E%d", s.deps.Clock.Now().UnixNano()%1_000_000)
	s.log.Error("panic "+what, "ref", ref, "user", c.in.User, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	onPanic(ref)
}

// answerPanic is recovering's answer to the sender of an input.
func answerPanic(c *call, ref string) {
	c.outcome = "error"
	c.outs = append(c.outs, private(plain(fmt.Sprintf("Something went wrong on gpubot's side while handling that (ref %s). The operator's log has the details; please try again.", ref))))
}

// identify knows the sender or refuses them.
func (s *Service) identify(next stage) stage {
	return func(c *call) {
		who, ok := s.who(c.in.User)
		if !ok {
			action, target := "command", ""
			switch {
			case c.in.Unreadable != nil:
				action, target = c.in.Unreadable.What, c.in.Unreadable.Target
			case c.in.Action != nil:
				action, target = string(c.in.Action.Name), c.in.Action.Request
				c.logVerb, c.logTarget = "button:"+action, target
			}
			s.audit(c, c.in.User, action, target, "refused", "unknown user")
			c.private(plain(fmt.Sprintf("I don't know who you are (%s). Ask a gpubot admin to add your Slack user ID to the people in gpubot's config.", c.in.User)))
			return
		}
		c.who = who
		next(c)
	}
}

// understand turns the input into c.cmd (and, for an action on a
// request, c.act), or answers what could not be understood.
func (s *Service) understand(next stage) stage {
	return func(c *call) {
		switch {
		case c.in.Unreadable != nil:
			s.unreadable(c, *c.in.Unreadable)
			return
		case c.in.Action != nil:
			a := *c.in.Action
			switch a.Name {
			case VerbApprove, VerbDeny, VerbPreempt, VerbCancel, VerbRelease, VerbExtend, VerbSwitch, VerbKeep:
			default:
				s.audit(c, c.who.Name, string(a.Name), a.Request, "invalid", "unknown button")
				c.private(plain(fmt.Sprintf("That button (%q) is not one gpubot knows; nothing was changed.", a.Name)))
				return
			}
			c.cmd = &Command{Verb: a.Name, ID: a.Request}
			c.act = &a
			c.logVerb, c.logTarget = "button:"+string(a.Name), a.Request
		default:
			cmd, err := Parse(c.in.Text, s.vocab)
			if err != nil {
				s.audit(c, c.who.Name, "command", "", "invalid", err.Error())
				c.private(parseErrorReply(err))
				return
			}
			c.cmd = &cmd
			c.logVerb, c.logTarget, c.outcome = string(cmd.Verb), cmd.ID, "ok"
			switch cmd.Verb {
			case VerbCancel, VerbRelease, VerbApprove, VerbPreempt:
				c.act = &Action{Name: cmd.Verb, Request: cmd.ID}
			case VerbSwitch:
				c.act = &Action{Name: VerbSwitch, Request: cmd.ID, Arg: cmd.Flavor}
			case VerbExtend:
				// In minutes: fmtDuration shows days without their minutes.
				c.act = &Action{Name: cmd.Verb, Request: cmd.ID, Arg: fmt.Sprintf("%dm", cmd.Duration/time.Minute)}
			case VerbDeny:
				c.act = &Action{Name: cmd.Verb, Request: cmd.ID, Arg: cmd.Reason}
			case VerbKeep:
				c.act = &Action{Name: VerbKeep, Request: cmd.ID}
			}
		}
		next(c)
	}
}

// writes reports whether verb changes anything (it then runs in the write
// section).
func writes(v Verb) bool {
	switch v {
	case VerbRequest, VerbTrack, VerbCancel, VerbRelease, VerbExtend, VerbApprove, VerbDeny, VerbPreempt, VerbSwitch, VerbKeep:
		return true
	}
	return false
}

// locking runs a changing input holding its request's lock (for an
// action on a request) and in the write section.
func (s *Service) locking(next stage) stage {
	return func(c *call) {
		if !writes(c.cmd.Verb) {
			next(c)
			return
		}
		if c.act != nil && c.act.Name != VerbKeep {
			defer s.lockRequest(c, c.act.Request)()
		}
		defer s.enter(c)()
		next(c)
	}
}

// authorize refuses what the sender may not do: capacity what-ifs for
// anyone but an admin, and actions on a request that the sender may not
// take, or that no longer apply to it in its state. For an action it
// reads the request into c.target.
func (s *Service) authorize(next stage) stage {
	return func(c *call) {
		if d := c.cmd.Delta; c.cmd.Verb == VerbWhatIf && d != nil && !c.who.Admin {
			s.audit(c, c.who.Name, "whatif", fmt.Sprintf("%+d %s", d.GPUs, d.Flavor), "refused", "not an admin")
			c.private(plain(fmt.Sprintf("Only admins (%s) can ask what-ifs about capacity. Nothing was changed.", strings.Join(s.admins(), ", "))))
			return
		}
		if c.act == nil || c.act.Name == VerbKeep {
			next(c)
			return
		}
		r, ok := s.target(c, *c.act)
		if !ok {
			return
		}
		if err := s.may(c.who, c.act.Name, r); err != nil {
			s.audit(c, c.who.Name, string(c.act.Name), r.ID, "refused", err.Error())
			c.private(plain(capitalize(err.Error()) + ". Nothing was changed."))
			return
		}
		if stale := s.stale(c.act.Name, r); stale != "" {
			s.audit(c, c.who.Name, string(c.act.Name), r.ID, "refused", "stale: "+stale)
			c.private(plain(stale + " Nothing was changed."))
			return
		}
		c.target = &r
		next(c)
	}
}

// audited makes sure that an action (typed or pressed) leaves an audit
// entry, whatever its handler did.
func (s *Service) audited(next stage) stage {
	return func(c *call) {
		before := c.audits
		next(c)
		if c.act != nil && c.audits == before {
			s.audit(c, c.who.Name, string(c.act.Name), c.act.Request, "ok", "")
		}
	}
}

package blockkit_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/bot/slack/blockkit"
	"github.com/gpubot/gpubot/commands"
)

var update = flag.Bool("update", false, "rewrite golden files")

// marshal is v as indented JSON, with <, > and & as they are so that the
// golden files read like what Slack receives after decoding.
func marshal(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// golden compares got with testdata/name.json, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (go test -update creates it): %v", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}

// message renders r, checks it against Slack's limits and returns its
// golden JSON.
func message(t *testing.T, r commands.Reply) []byte {
	t.Helper()
	m := blockkit.Message(r)
	checkMessage(t, m)
	return marshal(t, m)
}

// TestGoldenReplies renders every kind of reply and card the bot makes,
// produced by the real service on the bundled example configuration.
func TestGoldenReplies(t *testing.T) {
	e := newEnv(t)
	got := map[string]commands.Reply{}
	sender := func(outs []commands.Output) commands.Reply {
		return find(t, outs, commands.ToSender, "", "")
	}

	got["help"] = sender(e.do("alice", "/gpu help"))
	got["help-request"] = sender(e.do("alice", "/gpu help request"))
	got["capacity"] = sender(e.do("alice", "/gpu capacity"))
	got["error-parse"] = sender(e.do("alice", "/gpu request 8xh10 for 4h"))
	got["error-unknown-user"] = sender(e.do("U0NOBODY", "/gpu status"))
	got["whatif"] = sender(e.do("dave", "/gpu whatif 8xh100 for 4h"))

	outs := e.do("dave", `/gpu request 8xh100 for 4h reason "detector ablation"`)
	got["card-admitted"] = find(t, outs, commands.ToChannel, "r10", "running on")
	got["sender-admitted"] = sender(outs)
	got["thread-started-by-preemption"] = find(t, outs, commands.ToThread, "r10", "Started at once by preempting")
	got["dm-preempted"] = find(t, outs, commands.ToPerson, "", "was preempted")
	got["thread-preempted-requeued"] = find(t, outs, commands.ToThread, "r5", "Preempted by r10")
	got["card-requeued"] = find(t, outs, commands.UpdateCard, "r5", "queued: starts")
	got["thread-new-estimate"] = find(t, outs, commands.ToThread, "r5", "New estimate")

	outs = e.do("dave", "/gpu request 8xh100 for 6h")
	got["card-needs-approval"] = find(t, outs, commands.ToChannel, "r11", "needs approval")
	got["sender-needs-approval"] = sender(outs)
	got["queue"] = sender(e.do("dave", "/gpu queue h100"))

	e.do("alice", "/gpu request 8xh100 for 4h")
	outs = e.press("bob", commands.VerbApprove, "r12", "")
	got["dm-approved"] = find(t, outs, commands.ToPerson, "", "approved your request")
	got["thread-approved"] = find(t, outs, commands.ToThread, "r12", "Approved by bob")
	got["card-queued"] = find(t, outs, commands.UpdateCard, "r12", "queued: starts")
	outs = e.press("erin", commands.VerbDeny, "r11", "use <!here> & a100 instead")
	got["dm-denied"] = find(t, outs, commands.ToPerson, "", "was denied")
	got["card-denied"] = find(t, outs, commands.UpdateCard, "r11", "denied")

	got["whatif-capacity"] = sender(e.do("carol", "/gpu whatif +16xh100"))

	outs = e.advance(2 * time.Hour)
	got["thread-ending-soon"] = find(t, outs, commands.ToThread, "r3", "ends in 15m")
	got["thread-finished"] = find(t, outs, commands.ToThread, "r3", "Finished")
	got["card-finished"] = find(t, outs, commands.UpdateCard, "r3", "finished")
	got["thread-admitted"] = find(t, outs, commands.ToThread, "r12", "Admitted after")
	got["card-running"] = find(t, outs, commands.UpdateCard, "r12", "running on")

	outs = e.press("dave", commands.VerbExtend, "r10", "1h")
	got["thread-extended"] = find(t, outs, commands.ToThread, "r10", "Extended by 1h")
	got["status"] = sender(e.do("dave", "/gpu status"))
	got["status-one"] = sender(e.do("dave", "/gpu status r10"))
	got["usage"] = sender(e.do("dave", "/gpu usage vision"))

	// A request that can start only by preemption, with an admin's
	// button naming the victim, and a reason that tries to ping everyone.
	p := newEnv(t)
	p.do("alice", "/gpu request 16xa100 for 3h")
	p.do("dave", "/gpu request 8xa100 for 3h")
	p.do("grace", "/gpu request 8xa100 for 3h")
	outs = p.do("frank", `/gpu request 8xa100 for 1h reason "<!channel> & <@U0BOB> see <https://evil.example|docs>"`)
	got["card-can-preempt"] = find(t, outs, commands.ToChannel, "r13", "only by preempting r9")
	outs = p.press("carol", commands.VerbPreempt, "r13", "")
	got["thread-preempted-by-admin"] = find(t, outs, commands.ToThread, "r13", "carol preempted r9")

	for name, r := range got {
		t.Run(name, func(t *testing.T) { golden(t, "reply-"+name, message(t, r)) })
	}
}

// TestGoldenViews renders the request modal and App Home.
func TestGoldenViews(t *testing.T) {
	e := newEnv(t)
	e.do("dave", `/gpu request 8xh100 for 4h reason "detector ablation"`)
	e.do("dave", "/gpu request 8xh100 for 6h")
	e.do("alice", "/gpu request 8xh100 for 4h")
	e.advance(30 * time.Minute)

	views := map[string]any{
		"modal-request":       blockkit.RequestForm(blockkit.NewFormOptions(e.svc.FormDefaults("U0DAVE"), "C0VISION")),
		"modal-request-admin": blockkit.RequestForm(blockkit.NewFormOptions(e.svc.FormDefaults("carol"), "")),
		"home":                blockkit.Home(e.svc.Home(e.ctx, "U0DAVE")),
		"home-admin":          blockkit.Home(e.svc.Home(e.ctx, "U0CAROL")),
		"home-unknown":        blockkit.Home(e.svc.Home(e.ctx, "U0NOBODY")),
	}
	for name, v := range views {
		t.Run(name, func(t *testing.T) {
			b := marshal(t, v)
			checkView(t, b)
			golden(t, "view-"+name, b)
		})
	}
}

// show is what outputs say, for failure messages.
func show(outs []commands.Output) string {
	var b strings.Builder
	for _, o := range outs {
		fmt.Fprintf(&b, "── %s %s%s ──\n%s\n", o.To.Kind, o.To.Request, o.To.Person, text(o.Reply))
	}
	return b.String()
}

// text is everything a reply says.
func text(r commands.Reply) string {
	parts := []string{r.Text}
	for _, b := range r.Blocks {
		parts = append(parts, b.Text)
		for _, f := range b.Fields {
			parts = append(parts, f.Label+": "+f.Value)
		}
		if b.Table != nil {
			parts = append(parts, strings.Join(b.Table.Columns, " | "))
			for _, row := range b.Table.Rows {
				parts = append(parts, strings.Join(row, " | "))
			}
		}
		for _, bt := range b.Buttons {
			parts = append(parts, "["+bt.Label+"]")
		}
	}
	return strings.Join(parts, "\n")
}

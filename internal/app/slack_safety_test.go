package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	slackbot "github.com/gpubot/gpubot/bot/slack"
	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/internal/app"
	"github.com/gpubot/gpubot/store"
)

// TestSlackRevokedTokenStops: a bot token revoked while gpubot runs makes
// /readyz fail at the first refused call and, after the bounded recheck,
// app.Run return ErrBotToken (gpubot exits 1, so the Deployment shows it).
func TestSlackRevokedTokenStops(t *testing.T) {
	fake := startFake(t)
	addr := freeAddr(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{
			ConfigPath: exampleConfig(t, fastPosting), DataDir: dir,
			LogFile: filepath.Join(dir, "test.log"), LogLevel: slog.LevelDebug,
			Slack:   app.SlackOptions{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL(), TokenRecheck: 50 * time.Millisecond},
			Cluster: app.ClusterOptions{HTTPAddr: addr},
			Clock:   clocktesting.NewFakeClock(start),
		})
	}()
	wctx := waitCtx(t)
	if err := fake.WaitFor(wctx, func() bool { code, _ := httpGet(addr, "/readyz"); return code == http.StatusOK }); err != nil {
		t.Fatalf("never ready: %v", err)
	}
	fake.Revoke(slackfake.BotToken)
	if _, err := fake.WaitAck(wctx, fake.SlashCommand("U0DAVE", chRandom, "request 8xh100 for 4h")); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitFor(wctx, func() bool {
		code, body := httpGet(addr, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "token_revoked") || code == 0
	}); err != nil {
		t.Errorf("/readyz never said the token is refused: %v", err)
	}
	var err error
	select {
	case err = <-done:
	case <-wctx.Done():
		t.Fatal("gpubot kept running with its bot token revoked")
	}
	if !errors.Is(err, slackbot.ErrBotToken) || strings.Contains(err.Error(), slackfake.BotToken) {
		t.Errorf("app.Run: %v, want ErrBotToken without the token", err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "test.log"))
	if strings.Contains(string(log), slackfake.BotToken) {
		t.Error("the log shows the bot token")
	}
}

// TestSlackMalformedEnvelopeAnsweredAndAudited: through the whole bot, a
// command whose payload does not decode is acked, its sender told in
// private that gpubot couldn't understand it, and the audit log has it;
// a press of a gpubot button gpubot did not make likewise.
func TestSlackMalformedEnvelopeAnsweredAndAudited(t *testing.T) {
	fake := startFake(t)
	dir := t.TempDir()
	b := startSlackBotAt(t, fake, dir, exampleConfig(t, fastPosting), nil, "")
	bad, _ := json.Marshal(map[string]any{"token": "verif", "user_id": "U0DAVE", "channel_id": "C0RANDOM", "text": []string{"request", "8xh100"}})
	env := fake.SendRaw(slackfake.RawEnvelope{Type: "slash_commands", Payload: bad, AcceptsResponsePayload: true})
	if _, err := fake.WaitAck(waitCtx(t), env); err != nil {
		t.Fatal(err)
	}
	b.ephemeral("U0DAVE", "Sorry, gpubot couldn't understand that command (its text is an array, not a string). Nothing was changed.")
	press := fake.ClickButton("U0DAVE", "C0RANDOM", "1700000000.000001", "gpubot:approve", "", "r3")
	if _, err := fake.WaitAck(waitCtx(t), press); err != nil {
		t.Fatal(err)
	}
	b.ephemeral("U0DAVE", "couldn't understand that button (its value is not \"request|argument\")")
	noUnacked(t, fake)
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenReadOnly(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	entries, err := db.Audit(context.Background(), store.AuditQuery{Actor: "dave"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Action+" "+e.Outcome+" "+e.Detail)
	}
	for _, want := range []string{"command invalid its text is an array, not a string", "button invalid its value is not \"request|argument\""} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("audit lacks %q: %q", want, got)
		}
	}
}

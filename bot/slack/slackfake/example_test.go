package slackfake_test

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
)

// The bot posts a card and replies in its thread; the test reads them back.
func Example() {
	s := slackfake.New()
	defer s.Close()

	api := slack.New(slackfake.BotToken, slack.OptionAPIURL(s.APIURL()))
	ctx := context.Background()
	_, card, err := api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("r1: 8×h100 for 4h, queued", false))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _, _ = api.PostMessageContext(ctx, "C0GPU", slack.MsgOptionText("admitted on block b1", false), slack.MsgOptionTS(card))

	for _, m := range s.Thread("C0GPU", card) {
		fmt.Println(m.User, m.Text)
	}
	// Output:
	// U0GPUBOT r1: 8×h100 for 4h, queued
	// U0GPUBOT admitted on block b1
}

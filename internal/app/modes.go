package app

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"
)

// Chat is where people talk to gpubot.
type Chat string

// Chats.
const (
	// ChatAuto is Slack when SlackOptions has tokens, else the console.
	// The command line never uses it: it picks one with ChooseChat.
	ChatAuto Chat = ""
	// ChatConsole is the console chat on standard input and output.
	ChatConsole Chat = "console"
	// ChatSlack is Slack over Socket Mode; Run fails, naming the
	// variable, when a token is missing.
	ChatSlack Chat = "slack"
)

// ErrNoChat is returned by ChooseChat for "gpubot run" in a process that
// has neither Slack tokens nor a terminal: a pod whose Secret is missing
// would otherwise read an empty standard input and exit 0, a crash loop
// with no error.
var ErrNoChat = errors.New("no Slack tokens and no terminal")

// ChooseChat picks the chat for a command of the command line: "console"
// and "slack" are what they say; "run" is Slack when a token is set, the
// console on a terminal, and otherwise ErrNoChat, naming the variables.
func ChooseChat(command string, haveTokens, interactive bool) (Chat, error) {
	switch command {
	case "console":
		return ChatConsole, nil
	case "slack":
		return ChatSlack, nil
	}
	switch {
	case haveTokens:
		return ChatSlack, nil
	case interactive:
		return ChatConsole, nil
	}
	return "", fmt.Errorf("%w: SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set (nor SLACK_BOT_TOKEN_FILE and SLACK_APP_TOKEN_FILE), "+
		"and standard input is not a terminal; set them to run on Slack (gpubot slack), or run \"gpubot console\" to chat on standard input", ErrNoChat)
}

// ErrFlagNotApplicable is returned by CheckFlags for a flag that would do
// nothing in the chosen mode.
var ErrFlagNotApplicable = errors.New("flag does nothing here")

// CheckFlags refuses flags that do nothing with chat on the given cluster
// (onCluster: --kubeconfig or --in-cluster), so that nobody believes a
// flag took effect when it did not. set holds the names of the flags given
// on the command line, without dashes.
func CheckFlags(chat Chat, onCluster bool, set []string) error {
	var problems []string
	has := func(f string) bool { return slices.Contains(set, f) }
	if has("kubeconfig") && has("in-cluster") {
		problems = append(problems, "--kubeconfig and --in-cluster each name a cluster; give one")
	}
	if chat == ChatSlack {
		for _, f := range []string{"as", "start"} {
			if has(f) {
				problems = append(problems, fmt.Sprintf("--%s is for the console; on Slack people are who Slack says and time is real", f))
			}
		}
	}
	if chat != ChatSlack && onCluster && has("start") {
		problems = append(problems, "--start sets the simulated cluster's time; with a real cluster time is real")
	}
	if chat != ChatSlack && !onCluster && has("http-addr") {
		problems = append(problems, "--http-addr serves health and metrics on Slack or with a real cluster; the console on the simulated cluster serves nothing")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrFlagNotApplicable, strings.Join(problems, "; "))
}

// IsTerminal reports whether x is an *os.File on a terminal.
func IsTerminal(x any) bool {
	f, ok := x.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

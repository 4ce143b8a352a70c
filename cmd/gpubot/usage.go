package main

const usage = `gpubot — GPU requests by chat, on Kubernetes clusters that run Kueue.

People ask for GPUs with /gpu commands; gpubot answers at once with where
the request stands and when it will start, asks the right lead to approve
what needs approval, and follows the work until the GPUs are released.
On the schedules in the configuration it posts daily digests (usage,
waits, fragmentation, the capacity verdict, a chart) and a weekly success
report.
Every 10 minutes (zombies.schedule) it sweeps for zombies (work holding
GPUs without using them) and asks their owners.

Usage:
  gpubot [command] [flags]

Commands:
  console        chat with gpubot in this terminal, on the simulated cluster
                 (or a real one with --kubeconfig)
  slack          run the bot on Slack (Socket Mode); SLACK_BOT_TOKEN and
                 SLACK_APP_TOKEN are required
  run            the default: slack when a Slack token is set, the console
                 on a terminal, and otherwise an error naming the variables
  config check   check a configuration file: every problem with file:line
  rbac           print the Kubernetes RBAC gpubot needs for a configuration
  audit          print the audit log of a data directory
  usage export   export GPU usage of a data directory as CSV
  simulate       replay a GPU-cluster trace to compare policies and capacity
  kueue-setup    print the Kueue objects (flavors, queues, priorities…) that
                 match the configuration, to apply to the cluster
  store          check a store, or back it up (also while gpubot runs):
                 gpubot store check, gpubot store backup FILE
  version        print the version
  help           show this help, or a command's: gpubot help console

gpubot drives a real cluster only when told to: --kubeconfig FILE or
--in-cluster. Without them it runs on its simulated cluster, even when
$KUBECONFIG is set. A data directory remembers its cluster and refuses
to be used with another.

With no configuration gpubot uses its bundled example (deploy/gpubot.example.yaml):
two GPU flavors, three teams in a shared cohort, and some work already running,
two of it zombies.

Run "gpubot <command> --help" for a command's flags.
`

var botUsage = map[string]string{
	"console": `Usage: gpubot console [flags]

Chat with gpubot in this terminal, on the simulated cluster built from the
configuration (or on a real one with --kubeconfig). Type /gpu commands as
you would in Slack (/gpu help lists them) and console directives:
  :as <person>  :advance <duration>  :click <n> | :click <label> [id]
  :now  :people  :help  :quit
On a terminal, lines can be edited, Up and Down recall earlier lines (kept
in <data-dir>/console_history across sessions), Tab completes verbs,
flavors, teams and people, Ctrl-C clears the line and Ctrl-D leaves.
When standard input is not a terminal, lines are read one at a time and
replies printed as plain text; gpubot exits 0 at the end of the input.
State is kept in <data-dir>/gpubot.db: start again with the same
--data-dir and everything is where you left it (--start with a later time
resumes as if gpubot had been stopped until then). Scheduled digests are
posted when :advance passes their time; their charts are written to
<data-dir>/files and the path printed.

Flags:
`,
	"slack": `Usage: gpubot slack [flags]

Run the bot on Slack: it connects over Socket Mode (no public URL needed)
and serves /gpu until it is stopped. SLACK_BOT_TOKEN and SLACK_APP_TOKEN
(or their _FILE variants) are required: without them gpubot exits 1
naming the missing one. With --kubeconfig or --in-cluster it drives that
cluster's Kueue; otherwise the simulated cluster from the configuration,
in real time.

Environment:
  SLACK_BOT_TOKEN       the app's Bot User OAuth Token (xoxb-…)
  SLACK_APP_TOKEN       an app-level token with connections:write (xapp-…)
  SLACK_BOT_TOKEN_FILE, SLACK_APP_TOKEN_FILE
                        files holding the tokens (e.g. mounted secrets),
                        read when the variables above are not set
  SLACK_API_URL         the Web API base URL (default https://slack.com/api/,
                        or the config's slack.apiURL)
  GPUBOT_CONFIG, GPUBOT_DATA_DIR: see the flags

Flags:
`,
	"run": `Usage: gpubot [run] [flags]

Run the bot: on Slack (Socket Mode, see gpubot slack --help) when
SLACK_BOT_TOKEN or SLACK_APP_TOKEN is set; otherwise the console chat when
standard input is a terminal (see gpubot console --help). With neither
tokens nor a terminal it exits 1 naming the variables, instead of reading
an empty input. With --kubeconfig or --in-cluster it drives that cluster's
Kueue; otherwise the simulated cluster from the configuration.

Environment:
  SLACK_BOT_TOKEN       the app's Bot User OAuth Token (xoxb-…)
  SLACK_APP_TOKEN       an app-level token with connections:write (xapp-…)
  SLACK_BOT_TOKEN_FILE, SLACK_APP_TOKEN_FILE
                        files holding the tokens (e.g. mounted secrets),
                        read when the variables above are not set
  SLACK_API_URL         the Web API base URL (default https://slack.com/api/,
                        or the config's slack.apiURL)
  GPUBOT_CONFIG, GPUBOT_DATA_DIR: see the flags

Flags:
`,
}

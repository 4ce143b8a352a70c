package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gpubot/gpubot/internal/app"
)

// runKueueSetup is `gpubot kueue-setup`: it prints the Kueue objects that
// match a configuration.
func runKueueSetup(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gpubot kueue-setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", os.Getenv("GPUBOT_CONFIG"), "configuration `file` (YAML); default: the bundled example, or $GPUBOT_CONFIG")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: gpubot kueue-setup [--config FILE] > setup.yaml

Print the Kueue objects that match the configuration, to apply with
  kubectl apply --server-side -f setup.yaml
a Topology (the block, rack and host labels), one topology-aware
ResourceFlavor per flavor (its nodes: flavors[].accelerator as the value of
kubernetes.acceleratorLabel, or flavors[].nodeLabels), the cohorts, the
WorkloadPriorityClasses, and per team a namespace, a BestEffortFIFO
ClusterQueue with its quotas and preemption, and a LocalQueue. It ends with
what gpubot assumes of Kueue's manager Configuration, as comments.
deploy/kueue/setup.yaml is its output for the bundled example.

Flags:
`)
		app.PrintFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gpubot kueue-setup: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	out, err := app.KueueSetup(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "gpubot: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "gpubot: writing the setup: %v\n", err)
		return 1
	}
	return 0
}

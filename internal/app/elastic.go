package app

import (
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/simcluster"
)

// Elastic capacity on the simulated cluster: its spot flavors' nodes are
// reclaimed and its provisioned flavors' nodes come after the configured
// simulation times, and the service follows the simulated provisioning.

// simElastic is the simulated cluster's option for the configuration's
// elastic flavors.
func simElastic(cfg *config.Config) simcluster.Option {
	sims := cfg.SimFlavors()
	out := map[string]simcluster.ElasticFlavor{}
	for _, t := range cfg.Settings().Elastic.Flavors {
		sf := sims[t.Flavor]
		switch t.Capacity {
		case commands.CapacitySpot:
			out[t.Flavor] = simcluster.ElasticFlavor{ReclaimAfter: sf.ReclaimAfter}
		case commands.CapacityProvisioned:
			out[t.Flavor] = simcluster.ElasticFlavor{Check: t.AdmissionCheck, Provisioning: sf.ProvisioningTime, Retry: t.Retry,
				FailAttempts: sf.FailAttempts, FailureRate: sf.FailurePercent / 100, Seed: sf.Seed}
		}
	}
	return simcluster.WithElastic(out)
}

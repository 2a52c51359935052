// Command allot-nvml is allot's Nomad device plugin for NVIDIA GPUs. Run with
// no arguments by a Nomad client (from its plugin_dir) it serves the plugin;
// `allot-nvml probe` checks the local GPUs without Nomad; `allot-nvml inject`
// writes faults for fake mode.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot-sched/allot/internal/version"
	"github.com/allot-sched/allot/nvplugin/config"
	"github.com/allot-sched/allot/nvplugin/device"
	"github.com/allot-sched/allot/nvplugin/faults"
	"github.com/allot-sched/allot/nvplugin/nvml"
)

// PluginVersion is reported to Nomad; it must parse as a go-version version.
const PluginVersion = "0.1.0"

const usage = `usage:
  allot-nvml                         serve the Nomad device plugin (Nomad starts it from plugin_dir)
  allot-nvml probe [-fake MACHINE] [-seed S]
                                     fingerprint local GPUs through NVML and print groups,
                                     attributes, health and one round of stats
  allot-nvml inject -state DIR CMD   write a fault for fake mode; CMD is one of:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		serve()
		return 0
	}
	switch args[0] {
	case "probe":
		return probe(args[1:], stdout, stderr)
	case "inject":
		return inject(args[1:], stderr)
	case "version":
		fmt.Fprintf(stdout, "allot-nvml %s (build %s)\n", PluginVersion, version.Version)
		return 0
	}
	fmt.Fprint(stderr, usage+indent(faults.Usage))
	return 2
}

func indent(s string) string {
	out := "    "
	for _, c := range s {
		out += string(c)
		if c == '\n' {
			out += "    "
		}
	}
	return out + "\n"
}

func serve() {
	// Created before plugin.Serve, so it keeps the real stderr: go-plugin
	// redirects os.Stderr afterwards, and Nomad parses these JSON lines.
	log := hclog.New(&hclog.LoggerOptions{
		Name: device.Name, Level: hclog.Trace, JSONFormat: true, Output: os.Stderr,
	})
	log.Info("starting", "version", PluginVersion, "build", version.Version)
	p := device.New(log, PluginVersion, time.Now)
	defer p.Close()
	device.Serve(p, log)
}

func probe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fake := fs.String("fake", "", "probe a go-nvml mock machine (dgxh100, ...) instead of real NVML")
	seed := fs.String("seed", "probe", "seed of fake GPU UUIDs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	drv := nvml.Real()
	if *fake != "" {
		var err error
		if drv, err = nvml.Fake(*fake, *seed, "", time.Now); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if err := device.Probe(stdout, drv, config.Default().Policy(), time.Now); err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, nvml.ErrNoNVML) || errors.Is(err, device.ErrNoGPUs) {
			fmt.Fprintln(stderr, "allot-nvml probe needs an NVIDIA GPU and its driver (libnvidia-ml.so.1); try `allot-nvml probe -fake dgxh100` to see a simulated machine")
		}
		return 1
	}
	return 0
}

func inject(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("inject", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("state", "", "fault state directory (the plugin's fake_state_dir)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "inject: -state DIR is required (the fake_state_dir of the plugin config)")
		return 2
	}
	if err := faults.Inject(*dir, fs.Args(), time.Now()); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

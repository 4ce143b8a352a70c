package app

import (
	"flag"
	"fmt"
	"strings"
)

// PrintFlags prints fs's flags as --name, the way they are typed (the
// flag package's own listing shows one dash).
func PrintFlags(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, use := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(fs.Output(), line)
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && !strings.Contains(use, "default") {
			def = fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(fs.Output(), "        %s%s\n", use, def)
	})
}

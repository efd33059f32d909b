// step-ca for certbroker's tests: smallstep's certificate authority server, built from Debian's
// golang-github-smallstep-certificates-dev sources in GOPATH mode (test/support/step-ca.ts builds
// and caches it). The server is the `start` action of the certificates `commands` package, run as
// the whole application: `step-ca <ca.json> [--password-file <file>]`.
package main

import (
	"fmt"
	"os"

	"github.com/smallstep/certificates/commands"
	"github.com/urfave/cli"
)

func main() {
	app := cli.NewApp()
	app.Name = "step-ca"
	app.Usage = "certificate authority server (certbroker test build)"
	app.UsageText = commands.AppCommand.UsageText
	app.Flags = commands.AppCommand.Flags
	app.Action = commands.AppCommand.Action
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

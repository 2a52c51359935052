package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
)

// apiFlags are the flags of every command that talks to a server: where it
// is, the token for writes, TLS (tls_flags.go), and (for reads) -json and
// -stale.
func apiFlags(read bool) []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "address", Value: client.DefaultAddress, Sources: cli.EnvVars("ALLOT_ADDR"),
			Usage: "allot server HTTP address (env ALLOT_ADDR)"},
		&cli.StringFlag{Name: "token", Sources: cli.EnvVars("ALLOT_TOKEN"),
			Usage: "token for writes (env ALLOT_TOKEN)"},
	}
	flags = append(flags, tlsFlags()...)
	if read {
		flags = append(flags, jsonFlag(),
			&cli.BoolFlag{Name: "stale", Usage: "let any server answer from its local state instead of the leader"})
	}
	return flags
}

// apiClient builds the client from the command's flags.
func apiClient(c *cli.Command) (*client.Client, error) {
	tlsConf, err := tlsOptions(c).Config()
	if err != nil {
		return nil, usagef("-ca-cert, -client-cert, -client-key: %v", err)
	}
	cl, err := client.New(c.String("address"), c.String("token"), tlsConf)
	if err != nil {
		return nil, usagef("-address: %v", err)
	}
	return cl, nil
}

// showAnswer is the body of a command that asks the server one thing: it
// builds the client, calls ask with it, and prints the answer as JSON with
// -json, with text otherwise.
func showAnswer[T any](c *cli.Command, ask func(*client.Client) (T, error), text func(io.Writer, T) error) error {
	cl, err := apiClient(c)
	if err != nil {
		return err
	}
	answer, err := ask(cl)
	if err != nil {
		return apiError(err)
	}
	if c.Bool("json") {
		return printJSON(c.Root().Writer, answer)
	}
	return text(c.Root().Writer, answer)
}

// apiError rewrites the client's errors into messages that say what to do,
// once: a server whose answer already says how to pass the token (or that
// takes no writes at all) gets no second hint.
func apiError(err error) error {
	var ae *client.APIError
	if errors.Is(err, client.ErrUnauthorized) && errors.As(err, &ae) &&
		!strings.Contains(ae.Message, "ALLOT_TOKEN") && !strings.Contains(ae.Message, "writes are disabled") {
		return fmt.Errorf("%w; pass the server's token with -token or ALLOT_TOKEN", err)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

package commands_test

import (
	"errors"
	"fmt"

	"github.com/gpubot/gpubot/commands"
)

func ExampleParse() {
	vocab := commands.Vocabulary{
		Flavors: []string{"h100", "a100"},
		Teams:   []string{"nlp", "vision"},
	}

	cmd, err := commands.Parse(`/gpu request 8×H100 for 1h30m team nlp reason “fine-tune”`, vocab)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %+v\n", cmd.Verb, *cmd.Spec)

	_, err = commands.Parse("/gpu request 8xh10 for 4h", vocab)
	var perr *commands.ParseError
	if errors.As(err, &perr) {
		fmt.Println(perr)
		fmt.Println(perr.Caret())
		fmt.Println("try:", perr.Example)
	}
	// Output:
	// request: {GPUs:8 Flavor:h100 Duration:1h30m0s Team:nlp Priority: Topology: Template: Reason:fine-tune}
	// unknown flavor 'h10'; did you mean h100?
	// request 8xh10 for 4h
	//           ^^^
	// try: /gpu request 8xh100 for 4h team nlp
}

func ExampleParseDuration() {
	for _, s := range []string{"90m", "1d12h", "2 hours", "4"} {
		d, err := commands.ParseDuration(s)
		fmt.Println(d, err)
	}
	// Output:
	// 1h30m0s <nil>
	// 36h0m0s <nil>
	// 2h0m0s <nil>
	// 0s invalid duration "4": missing unit (m, h or d) (did you mean 4h?)
}

func ExampleClosest() {
	fmt.Println(commands.Closest("reqest", []string{"request", "release", "status"}))
	fmt.Println(commands.Closest("prio", []string{"team", "priority", "topology"}))
	fmt.Println(commands.Closest("launch", []string{"request", "release", "status"}) == "")
	// Output:
	// request
	// priority
	// true
}

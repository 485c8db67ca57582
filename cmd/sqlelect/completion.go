package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

var completionCmd = &command{
	name:    "completion",
	args:    "bash|zsh|fish",
	summary: "print a shell completion script for sqlelect's commands and flags",
	detail: `Prints a script that completes the commands, each command's flags, migrate's
actions and help's commands. Load it in the shell's start-up file, or install
it where the shell looks for completions (see the examples).`,
	example: `source <(sqlelect completion bash)                 # in ~/.bashrc
sqlelect completion zsh > "${fpath[1]}/_sqlelect"    # then restart zsh
sqlelect completion fish > ~/.config/fish/completions/sqlelect.fish`,
	run: (*cli).completion,
}

// completionShells are the shells completion writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

// migrateActions are the first arguments of migrate, for completion.
var migrateActions = []string{"up", "down", "version", "force", "adopt", "adopt-end", "unadopt"}

func (c *cli) completion(cmd *command, args []string) error {
	args, err := c.parse(cmd, newFlagSet(cmd), args)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return failf(exitUsage, "want one shell: bash, zsh or fish (see 'sqlelect completion --help')")
	}
	comps := c.completions()
	switch args[0] {
	case "bash":
		writeBash(c.stdout, comps)
	case "zsh":
		writeZsh(c.stdout, comps)
	case "fish":
		writeFish(c.stdout, comps)
	default:
		return failf(exitUsage, "completion %q: want bash, zsh or fish", args[0])
	}
	return nil
}

// completion is what the scripts complete for one command.
type completion struct {
	name, summary string
	flags         []*pflag.Flag // the visible ones
	args          []string      // the words of its first argument, if a fixed set
}

// completions collects each command's flags by running it with a cli that
// hands over the flag set at parse instead of parsing (see cli.parse).
func (c *cli) completions() []completion {
	var names []string
	for _, cmd := range c.commands {
		names = append(names, cmd.name)
	}
	var out []completion
	for _, cmd := range c.commands {
		comp := completion{name: cmd.name, summary: cmd.summary}
		probe := &cli{stdin: c.stdin, stdout: io.Discard, stderr: io.Discard, commands: c.commands,
			flagSet: func(fs *pflag.FlagSet) {
				fs.VisitAll(func(f *pflag.Flag) {
					if !f.Hidden {
						comp.flags = append(comp.flags, f)
					}
				})
			}}
		_ = cmd.run(probe, cmd, nil)
		switch cmd.name {
		case "migrate":
			comp.args = migrateActions
		case "completion":
			comp.args = completionShells
		case "help":
			comp.args = names
		}
		out = append(out, comp)
	}
	return out
}

// flagWords lists the flags of comp as the shell sees them (--name).
func flagWords(comp completion) string {
	var w []string
	for _, f := range comp.flags {
		w = append(w, "--"+f.Name)
	}
	return strings.Join(w, " ")
}

func writeBash(w io.Writer, comps []completion) {
	var names []string
	for _, comp := range comps {
		names = append(names, comp.name)
	}
	fmt.Fprintf(w, `# bash completion for sqlelect (sqlelect completion bash)
_sqlelect() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	COMPREPLY=()
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
		return
	fi
	local i
	for ((i = 2; i < COMP_CWORD; i++)); do
		[ "${COMP_WORDS[i]}" = -- ] && return # the command of run: default completion
	done
	local flags="" args=""
	case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, comp := range comps {
		fmt.Fprintf(w, "\t%s) flags=%q args=%q ;;\n", comp.name, flagWords(comp), strings.Join(comp.args, " "))
	}
	fmt.Fprint(w, `	esac
	case $cur in
	-*) COMPREPLY=($(compgen -W "$flags" -- "$cur")) ;;
	*) [ "$COMP_CWORD" -eq 2 ] && [ -n "$args" ] && COMPREPLY=($(compgen -W "$args" -- "$cur")) ;;
	esac
}
complete -o default -F _sqlelect sqlelect
`)
}

func writeZsh(w io.Writer, comps []completion) {
	fmt.Fprint(w, `#compdef sqlelect
# zsh completion for sqlelect (sqlelect completion zsh)
_sqlelect() {
	if (( CURRENT == 2 )); then
		local -a cmds
		cmds=(
`)
	for _, comp := range comps {
		fmt.Fprintf(w, "\t\t\t%s\n", shellQuote(comp.name+":"+comp.summary))
	}
	fmt.Fprint(w, `		)
		_describe command cmds
		return
	fi
	(( ${words[(I)--]} > 1 && ${words[(I)--]} < CURRENT )) && { _files; return }
	local -a flags args
	case $words[2] in
`)
	for _, comp := range comps {
		fmt.Fprintf(w, "\t(%s) flags=(%s) args=(%s) ;;\n", comp.name, flagWords(comp), strings.Join(comp.args, " "))
	}
	fmt.Fprint(w, `	esac
	if [[ $PREFIX == -* ]]; then
		compadd -- $flags
	elif (( CURRENT == 3 && ${#args} > 0 )); then
		compadd -- $args
	else
		_files
	fi
}
if [[ ${funcstack[1]} == _sqlelect ]]; then
	_sqlelect "$@"
else
	compdef _sqlelect sqlelect
fi
`)
}

func writeFish(w io.Writer, comps []completion) {
	fmt.Fprintln(w, "# fish completion for sqlelect (sqlelect completion fish)")
	for _, comp := range comps {
		fmt.Fprintf(w, "complete -c sqlelect -n __fish_use_subcommand -f -a %s -d %s\n", comp.name, fishQuote(comp.summary))
	}
	for _, comp := range comps {
		cond := fishQuote("__fish_seen_subcommand_from " + comp.name)
		for _, f := range comp.flags {
			_, usage := pflag.UnquoteUsage(f)
			req := ""
			if f.NoOptDefVal == "" {
				req = " -r"
			}
			fmt.Fprintf(w, "complete -c sqlelect -n %s -l %s%s -d %s\n", cond, f.Name, req, fishQuote(firstClause(usage)))
		}
		if len(comp.args) > 0 {
			fmt.Fprintf(w, "complete -c sqlelect -n %s -f -a %s\n", cond, fishQuote(strings.Join(comp.args, " ")))
		}
	}
}

// firstClause shortens a flag's usage to its first clause, for a
// description beside the flag.
func firstClause(s string) string {
	for _, sep := range []string{"; ", " (", ", e.g."} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	return s
}

// shellQuote quotes s for sh and zsh, in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fishQuote quotes s for fish, in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

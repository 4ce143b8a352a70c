package slackfake

import (
	"encoding/json"
	"net/url"
	"time"
)

// Identity of the fake workspace, app and bot.
const (
	// BotToken is the only bot token (xoxb) the Web API accepts.
	BotToken = "xoxb-fake-bot"
	// AppToken is the only app-level token (xapp) apps.connections.open accepts.
	AppToken = "xapp-fake-app"

	TeamID     = "T0FAKE"
	TeamDomain = "gpubot-fake"
	AppID      = "A0GPUBOT"
	BotID      = "B0GPUBOT"
	BotUserID  = "U0GPUBOT"
	BotName    = "gpubot"
	// Command is the slash command SlashCommand sends.
	Command = "/gpu"
)

// User is a member of the fake workspace, answered by users.info and
// users.lookupByEmail.
type User struct {
	ID       string
	Name     string // handle, e.g. "alice"
	RealName string // defaults to Name
	Email    string
	TZ       string // IANA name, e.g. "Europe/Berlin"; defaults to "UTC"
	IsBot    bool
}

// DefaultUsers is the workspace when no WithUsers option is given.
var DefaultUsers = []User{
	{ID: "U0ALICE", Name: "alice", RealName: "Alice Ng", Email: "alice@example.com", TZ: "America/Los_Angeles"},
	{ID: "U0BOB", Name: "bob", RealName: "Bob Roy", Email: "bob@example.com", TZ: "Europe/Berlin"},
	{ID: "U0CAROL", Name: "carol", RealName: "Carol Diaz", Email: "carol@example.com", TZ: "UTC"},
}

// Revision is an earlier version of a message, kept when chat.update or a
// response_url replace_original changes it.
type Revision struct {
	Text   string
	Blocks json.RawMessage
	At     time.Time // when it was replaced
}

// Message is a message the bot posted (or Slack posted on its behalf, e.g. an
// in_channel response_url post).
type Message struct {
	Channel  string // the channel's ID, also for a post to its name
	TS       string
	ThreadTS string // "" for a top-level message
	// User is the author (BotUserID for the bot); for an ephemeral message it is
	// the user who sees it.
	User   string
	Text   string
	Blocks json.RawMessage // nil when the message has no blocks
	// Edits counts the updates (chat.update, replace_original); History holds
	// the versions they replaced, oldest first.
	Edits   int
	History []Revision
	Deleted bool // chat.delete or delete_original
	// Metadata is the message metadata it was posted with (event_type and
	// event_payload), nil for none.
	Metadata json.RawMessage
	Files    []string // file IDs shared with the message (files.completeUploadExternal)
	// Via is how it was posted: "chat.postMessage", "chat.postEphemeral",
	// "response_url", "ack" (a slash command ack payload) or
	// "files.completeUploadExternal".
	Via      string
	PostedAt time.Time
}

// ResponsePost is one POST to a response_url.
type ResponsePost struct {
	URL        string
	EnvelopeID string // the envelope whose payload carried the URL
	Kind       string // "slash_commands", "block_actions" or "view_submission"
	User       string
	Channel    string
	MessageTS  string // block_actions: the message the button was on
	// From the JSON body:
	ResponseType    string // "ephemeral" (the default) or "in_channel"
	ReplaceOriginal bool
	DeleteOriginal  bool
	Text            string
	Blocks          json.RawMessage
	ThreadTS        string
	Body            json.RawMessage // the whole body as sent
	At              time.Time
	Error           string // "" when accepted, else Slack's error (used_url, expired_url, ...)
}

// View is one call of views.open, views.push, views.update or views.publish
// (or an ack's response_action), successful or not.
type View struct {
	Method     string // "views.open", ..., or "response_action.update"/"response_action.push"
	ID         string // view ID ("V…"), "" when the call failed
	User       string // views.publish user_id; for open/push the user of the trigger
	TriggerID  string
	ExternalID string
	Hash       string
	View       json.RawMessage // the view object as sent
	At         time.Time
	Error      string // "" when accepted
}

// File is a file uploaded through files.getUploadURLExternal, the upload URL
// and files.completeUploadExternal.
type File struct {
	ID             string
	Name           string // filename given to files.getUploadURLExternal
	AltText        string // its alt_txt (an image's description), if any
	Title          string
	Length         int    // declared length
	Content        []byte // what was POSTed to the upload URL (nil until then)
	Uploaded       bool
	Completed      bool
	Channel        string
	ThreadTS       string
	InitialComment string
	At             time.Time
}

// Call is one Web API call as the fake received it.
type Call struct {
	Method string
	// Token is the token used (from Authorization: Bearer, the form or the
	// query), "" when there was none.
	Token       string
	HTTPMethod  string
	ContentType string
	Params      url.Values      // form and query parameters, token removed
	JSON        json.RawMessage // the body of a JSON request
	At          time.Time
	Status      int    // HTTP status answered
	Error       string // Slack error answered, "" when ok
}

// Ack is one Socket Mode acknowledgement sent by the bot.
type Ack struct {
	EnvelopeID string
	Payload    json.RawMessage // nil when the ack had no payload
	At         time.Time
	Conn       int           // the connection it arrived on
	Latency    time.Duration // since the envelope was (last) sent
}

// Envelope is one Socket Mode envelope the fake sent (or tried to send).
type Envelope struct {
	ID        string
	Type      string // "slash_commands", "interactive", "events_api"
	Body      json.RawMessage
	Attempts  int       // deliveries so far (1 + redeliveries)
	Conn      int       // connection of the latest delivery, 0 if undelivered
	SentAt    time.Time // latest delivery
	Delivered bool
	Acked     bool
	AckedAt   time.Time
}

// ViewSubmission describes a modal submission for SubmitView.
type ViewSubmission struct {
	// ViewID of the modal being submitted. Empty: the user's most recent modal
	// from views.open/views.push/views.update, if any.
	ViewID string
	// CallbackID and PrivateMetadata override those of the opened view when
	// not empty.
	CallbackID      string
	PrivateMetadata string
	// Values is state.values: block_id → action_id → input.
	Values map[string]map[string]Input
}

// Input is the state of one input element in a view submission. Build it with
// TextInput, StaticSelect, UsersSelect and the other constructors.
type Input struct {
	Type   string   // element type, e.g. "plain_text_input", "static_select"
	Value  string   // single value (text, selected option value, user, date, ...)
	Values []string // multi-select values
}

// TextInput is the state of a plain_text_input.
func TextInput(v string) Input { return Input{Type: "plain_text_input", Value: v} }

// NumberInput is the state of a number_input.
func NumberInput(v string) Input { return Input{Type: "number_input", Value: v} }

// StaticSelect is the state of a static_select with the option of this value.
func StaticSelect(value string) Input { return Input{Type: "static_select", Value: value} }

// MultiStaticSelect is the state of a multi_static_select.
func MultiStaticSelect(values ...string) Input {
	return Input{Type: "multi_static_select", Values: values}
}

// RadioButtons is the state of radio_buttons with the option of this value.
func RadioButtons(value string) Input { return Input{Type: "radio_buttons", Value: value} }

// Checkboxes is the state of checkboxes with these option values checked.
func Checkboxes(values ...string) Input { return Input{Type: "checkboxes", Values: values} }

// UsersSelect is the state of a users_select.
func UsersSelect(user string) Input { return Input{Type: "users_select", Value: user} }

// MultiUsersSelect is the state of a multi_users_select.
func MultiUsersSelect(users ...string) Input {
	return Input{Type: "multi_users_select", Values: users}
}

// ConversationsSelect is the state of a conversations_select.
func ConversationsSelect(id string) Input {
	return Input{Type: "conversations_select", Value: id}
}

// ChannelsSelect is the state of a channels_select.
func ChannelsSelect(id string) Input { return Input{Type: "channels_select", Value: id} }

// DatePicker is the state of a datepicker ("2026-12-01").
func DatePicker(date string) Input { return Input{Type: "datepicker", Value: date} }

// TimePicker is the state of a timepicker ("14:30").
func TimePicker(hhmm string) Input { return Input{Type: "timepicker", Value: hhmm} }

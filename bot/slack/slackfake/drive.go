package slackfake

import (
	"encoding/json"
	"strings"
	"time"
)

// verificationToken is the deprecated token Slack still puts in payloads.
const verificationToken = "fakeVerificationToken0"

func (s *Server) userNameLocked(user string) string {
	if u, ok := s.users[user]; ok && u.Name != "" {
		return u.Name
	}
	return strings.ToLower(user)
}

// channelNameLocked is what Slack puts in channel_name: the name a channel
// was given (see ChannelID), else, for channels the fake knows only by ID,
// the ID in lower case.
func (s *Server) channelNameLocked(ch string) string {
	switch {
	case strings.HasPrefix(ch, "D"):
		return "directmessage"
	case strings.HasPrefix(ch, "G"):
		return "privategroup"
	}
	if name, ok := s.nameByChan[ch]; ok {
		return name
	}
	return strings.ToLower(ch)
}

// channelArgLocked is a driver's channel argument as Slack sends it: the
// ID, for a channel given by name.
func (s *Server) channelArgLocked(ch string) string {
	if name, ok := channelNameOf(ch); ok {
		return s.channelIDLocked(name)
	}
	return ch
}

func (s *Server) userObjLocked(user string) map[string]any {
	name := s.userNameLocked(user)
	return map[string]any{"id": user, "username": name, "name": name, "team_id": TeamID}
}

func teamObj() map[string]any { return map[string]any{"id": TeamID, "domain": TeamDomain} }

// mustJSON marshals a payload the fake built; it cannot fail for these maps,
// but answers {} rather than panic if it ever does.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// SlashCommand delivers "/gpu text" typed by user in channel (an ID, or a
// name such as "#random", sent as its ID), as a slash_commands envelope
// (accepts_response_payload: true) with a response_url and a trigger_id,
// and returns its envelope_id.
func (s *Server) SlashCommand(user, channel, text string) string {
	return s.send(s.slashCommandLocked(user, channel, text))
}

// SlashCommandEnvelope builds the envelope SlashCommand would deliver
// (its response_url and trigger_id are issued) without delivering it, for
// SendRaw or DisconnectThen.
func (s *Server) SlashCommandEnvelope(user, channel, text string) RawEnvelope {
	env := s.slashCommandLocked(user, channel, text)
	return RawEnvelope{ID: env.ID, Type: env.Type, Payload: env.payload, AcceptsResponsePayload: true, user: user, channel: env.channel, kind: env.kind}
}

// slashCommandLocked builds a slash_commands envelope; it takes s.mu.
func (s *Server) slashCommandLocked(user, channel, text string) *envelope {
	s.mu.Lock()
	channel = s.channelArgLocked(channel)
	env := &envelope{Envelope: Envelope{ID: newEnvelopeID(), Type: "slash_commands"}, accepts: true, kind: "slash_commands", user: user, channel: channel}
	ru := s.newResponseURLLocked("slash_commands", user, channel, "")
	ru.envelopeID = env.ID
	env.payload = mustJSON(map[string]any{
		"token":                 verificationToken,
		"team_id":               TeamID,
		"team_domain":           TeamDomain,
		"channel_id":            channel,
		"channel_name":          s.channelNameLocked(channel),
		"user_id":               user,
		"user_name":             s.userNameLocked(user),
		"command":               Command,
		"text":                  text,
		"api_app_id":            AppID,
		"is_enterprise_install": "false",
		"response_url":          ru.url,
		"trigger_id":            s.newTriggerLocked(user),
	})
	s.mu.Unlock()
	return env
}

// elementIn finds the element with actionID in one block (section accessory,
// actions/context elements, input element).
func elementIn(blk map[string]any, actionID string) map[string]any {
	cands := []any{blk["accessory"], blk["element"]}
	if els, ok := blk["elements"].([]any); ok {
		cands = append(cands, els...)
	}
	for _, c := range cands {
		if el, ok := c.(map[string]any); ok && el["action_id"] == actionID {
			return el
		}
	}
	return nil
}

// findElement finds the element with actionID in the block with blockID.
func findElement(blocks []any, blockID, actionID string) map[string]any {
	for _, b := range blocks {
		if blk, ok := b.(map[string]any); ok && blk["block_id"] == blockID {
			if el := elementIn(blk, actionID); el != nil {
				return el
			}
		}
	}
	return nil
}

// findAction finds the element with actionID in any block; it returns the
// element and its block's block_id ("" when the block has none).
func findAction(blocks []any, actionID string) (map[string]any, string) {
	for _, b := range blocks {
		if blk, ok := b.(map[string]any); ok {
			if el := elementIn(blk, actionID); el != nil {
				id, _ := blk["block_id"].(string)
				return el, id
			}
		}
	}
	return nil, ""
}

func parseBlocks(raw json.RawMessage) []any {
	var blocks []any
	_ = json.Unmarshal(raw, &blocks)
	return blocks
}

// action builds one entry of "actions" for a button press. Slack always
// sends a block_id (its own when the bot set none), and slack-go counts an
// action as a block action only when it has one, so an empty blockID is
// looked up in the blocks, else made up.
func (s *Server) actionLocked(blocks []any, where, actionID, blockID, value string) map[string]any {
	var el map[string]any
	if blockID == "" {
		el, blockID = findAction(blocks, actionID)
		if blockID == "" {
			blockID = newEnvelopeID()[:5]
		}
	} else {
		el = findElement(blocks, blockID, actionID)
	}
	label := actionID
	typ := "button"
	if el != nil {
		if t, ok := el["type"].(string); ok {
			typ = t
		}
		if txt, ok := el["text"].(map[string]any); ok {
			if l, ok := txt["text"].(string); ok {
				label = l
			}
		}
		if v, ok := el["value"].(string); ok && v != value {
			s.logf("click on %s: value %q differs from the button's %q", where, value, v)
		}
	} else {
		s.logf("click on %s: no element with block_id %q and action_id %q", where, blockID, actionID)
	}
	a := map[string]any{
		"type":      typ,
		"action_id": actionID,
		"block_id":  blockID,
		"text":      map[string]any{"type": "plain_text", "text": label, "emoji": true},
		"action_ts": s.nextTSLocked(),
	}
	if value != "" {
		a["value"] = value
	}
	return a
}

// ClickButton delivers a block_actions interaction: user pressed the button
// (actionID in blockID, with value) on the message messageTS in channel. The
// payload has container, channel, message (when the message is known to the
// fake), trigger_id and a response_url bound to that message, and returns the
// envelope_id. An empty blockID is taken from the block holding actionID.
// A click on an ephemeral message (from Ephemerals) sets
// container.is_ephemeral and has no message, as Slack sends it.
func (s *Server) ClickButton(user, channel, messageTS, actionID, blockID, value string) string {
	s.mu.Lock()
	channel = s.channelArgLocked(channel)
	env := &envelope{Envelope: Envelope{ID: newEnvelopeID(), Type: "interactive"}, kind: "block_actions", user: user, channel: channel}
	msg := s.findLocked(channel, messageTS)
	ephemeral := false
	if msg == nil {
		for _, m := range s.ephemeral {
			if m.Channel == channel && m.TS == messageTS {
				msg, ephemeral = m, true
			}
		}
	}
	var blocks []any
	if msg != nil {
		blocks = parseBlocks(msg.Blocks)
	} else {
		s.logf("ClickButton: no message %s in %s", messageTS, channel)
	}
	ru := s.newResponseURLLocked("block_actions", user, channel, messageTS)
	ru.envelopeID = env.ID
	container := map[string]any{"type": "message", "message_ts": messageTS, "channel_id": channel, "is_ephemeral": ephemeral}
	p := map[string]any{
		"type":                  "block_actions",
		"user":                  s.userObjLocked(user),
		"api_app_id":            AppID,
		"token":                 verificationToken,
		"container":             container,
		"trigger_id":            s.newTriggerLocked(user),
		"team":                  teamObj(),
		"enterprise":            nil,
		"is_enterprise_install": false,
		"channel":               map[string]any{"id": channel, "name": s.channelNameLocked(channel)},
		"state":                 map[string]any{"values": map[string]any{}},
		"response_url":          ru.url,
		"actions":               []any{s.actionLocked(blocks, "message "+messageTS, actionID, blockID, value)},
	}
	if msg != nil && !ephemeral {
		p["message"] = msg.wire()
		if msg.ThreadTS != "" {
			container["thread_ts"] = msg.ThreadTS
		}
	}
	env.payload = mustJSON(p)
	s.mu.Unlock()
	return s.send(env)
}

// ClickViewButton delivers a block_actions interaction from a button in a view
// (a modal or the App Home) the bot opened or published: container type
// "view", the view object, a trigger_id and no response_url.
func (s *Server) ClickViewButton(user, viewID, actionID, blockID, value string) string {
	env := &envelope{Envelope: Envelope{ID: newEnvelopeID(), Type: "interactive"}, kind: "block_actions", user: user, viewID: viewID}
	s.mu.Lock()
	var view map[string]any
	var blocks []any
	if v := s.openViews[viewID]; v != nil {
		view = v.wire()
		blocks, _ = view["blocks"].([]any)
	} else {
		s.logf("ClickViewButton: no view %s", viewID)
	}
	env.payload = mustJSON(map[string]any{
		"type":                  "block_actions",
		"user":                  s.userObjLocked(user),
		"api_app_id":            AppID,
		"token":                 verificationToken,
		"container":             map[string]any{"type": "view", "view_id": viewID},
		"trigger_id":            s.newTriggerLocked(user),
		"team":                  teamObj(),
		"enterprise":            nil,
		"is_enterprise_install": false,
		"view":                  view,
		"actions":               []any{s.actionLocked(blocks, "view "+viewID, actionID, blockID, value)},
	})
	s.mu.Unlock()
	return s.send(env)
}

// SubmitView delivers a view_submission interaction for user's modal: the
// view the bot opened (ViewSubmission.ViewID, or the user's latest modal) with
// state.values built from ViewSubmission.Values as Slack shapes them per
// element type, and returns the envelope_id. The ack may carry a
// response_action (errors, update, push, clear).
func (s *Server) SubmitView(user string, vs ViewSubmission) string {
	// Slack lets the ack of a view_submission carry a response_action.
	env := &envelope{Envelope: Envelope{ID: newEnvelopeID(), Type: "interactive"}, accepts: true, kind: "view_submission", user: user}
	s.mu.Lock()
	id := vs.ViewID
	if id == "" {
		id = s.lastModal[user]
	}
	var view map[string]any
	if v := s.openViews[id]; v != nil {
		view = v.wire()
	} else {
		s.logf("SubmitView: user %s has no open modal %q; submitting a bare view", user, id)
		if id == "" {
			id = s.nextIDLocked("V")
		}
		view = (&openView{id: id, view: json.RawMessage(`{"type":"modal","blocks":[]}`), hash: s.nextHashLocked()}).wire()
	}
	env.viewID = id
	if vs.CallbackID != "" {
		view["callback_id"] = vs.CallbackID
	}
	if vs.PrivateMetadata != "" {
		view["private_metadata"] = vs.PrivateMetadata
	}
	blocks, _ := view["blocks"].([]any)
	values := map[string]any{}
	for blockID, actions := range vs.Values {
		vals := map[string]any{}
		for actionID, in := range actions {
			el := findElement(blocks, blockID, actionID)
			if el == nil && blocks != nil {
				s.logf("SubmitView: view %s has no input with block_id %q and action_id %q", id, blockID, actionID)
			}
			vals[actionID] = inputWire(in, el)
		}
		values[blockID] = vals
	}
	view["state"] = map[string]any{"values": values}
	env.payload = mustJSON(map[string]any{
		"type":                  "view_submission",
		"team":                  teamObj(),
		"user":                  s.userObjLocked(user),
		"api_app_id":            AppID,
		"token":                 verificationToken,
		"trigger_id":            s.newTriggerLocked(user),
		"view":                  view,
		"response_urls":         []any{},
		"is_enterprise_install": false,
		"enterprise":            nil,
	})
	s.mu.Unlock()
	return s.send(env)
}

// option is an option object for a selected value, with the element's label.
func option(el map[string]any, value string) map[string]any {
	text := map[string]any{"type": "plain_text", "text": value, "emoji": true}
	if el != nil {
		opts, _ := el["options"].([]any)
		if groups, ok := el["option_groups"].([]any); ok {
			for _, g := range groups {
				if gm, ok := g.(map[string]any); ok {
					more, _ := gm["options"].([]any)
					opts = append(opts, more...)
				}
			}
		}
		for _, o := range opts {
			if om, ok := o.(map[string]any); ok && om["value"] == value {
				if t, ok := om["text"].(map[string]any); ok {
					text = t
				}
			}
		}
	}
	return map[string]any{"text": text, "value": value}
}

// inputWire shapes one state value as Slack does for the element type.
func inputWire(in Input, el map[string]any) map[string]any {
	typ := in.Type
	if typ == "" {
		typ = "plain_text_input"
	}
	w := map[string]any{"type": typ}
	list := func() []string {
		if in.Values == nil {
			return []string{}
		}
		return in.Values
	}
	switch typ {
	case "static_select", "external_select", "radio_buttons":
		if in.Value == "" {
			w["selected_option"] = nil
		} else {
			w["selected_option"] = option(el, in.Value)
		}
	case "multi_static_select", "multi_external_select", "checkboxes":
		opts := []any{}
		for _, v := range in.Values {
			opts = append(opts, option(el, v))
		}
		w["selected_options"] = opts
	case "users_select":
		w["selected_user"] = in.Value
	case "multi_users_select":
		w["selected_users"] = list()
	case "conversations_select":
		w["selected_conversation"] = in.Value
	case "multi_conversations_select":
		w["selected_conversations"] = list()
	case "channels_select":
		w["selected_channel"] = in.Value
	case "multi_channels_select":
		w["selected_channels"] = list()
	case "datepicker":
		w["selected_date"] = in.Value
	case "timepicker":
		w["selected_time"] = in.Value
	default: // plain_text_input, number_input, email_text_input, url_text_input
		w["value"] = in.Value
	}
	return w
}

// AppHomeOpened delivers an events_api envelope with an event_callback
// app_home_opened event (tab "home") for user, with the home view when the bot
// has published one, and returns the envelope_id.
func (s *Server) AppHomeOpened(user string) string {
	env := &envelope{Envelope: Envelope{ID: newEnvelopeID(), Type: "events_api"}, kind: "app_home_opened", user: user}
	s.mu.Lock()
	dm, _ := s.dmLocked(user)
	env.channel = dm
	ts := s.nextTSLocked()
	event := map[string]any{"type": "app_home_opened", "user": user, "channel": dm, "tab": "home", "event_ts": ts}
	for _, v := range s.openViews {
		if v.home && v.user == user {
			event["view"] = v.wire()
		}
	}
	env.payload = mustJSON(map[string]any{
		"token":      verificationToken,
		"team_id":    TeamID,
		"api_app_id": AppID,
		"event":      event,
		"type":       "event_callback",
		"event_id":   s.nextIDLocked("Ev"),
		"event_time": time.Now().Unix(),
		"authorizations": []any{map[string]any{
			"enterprise_id": nil, "team_id": TeamID, "user_id": BotUserID, "is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false,
	})
	s.notifyLocked()
	s.mu.Unlock()
	return s.send(env)
}

"""The app's page services: what a page asks for, checked once against the server's caps, and done in a queue turn.

A page collects input and renders; the work it asks for is done here, so no page can skip a cap or the compute
queue, and no page copies the math (`tests/app/test_app_layers.py`: the app reaches tevcore through this package,
the room and plain values only). The modules:

- the seat and the participant: `turns` (the `Seat` a request arrives with: the server's `Limits`, its compute
  queue, the participant's key, and how the page hears back), `participants` (one key for all tabs of a browser),
  `page_states` (one typed state object per page and participant, so a page switch or a reload finds the work),
  `reader` (the one capped reader of every upload and file: the byte cap, and the text cap of a gzip's expanded
  size), `rules` (the rule and builder names a page shows), `models` (the targets, drafters and prompt sets a page
  loads; the app caches them);
- the explorer: `explorer` (a live generation started and decoded in a queue turn, a round re-scored for its
  rows), `traces` (trace files opened, saved, downloaded, described), `trails` (a sampled round's rrs or block
  trail, the sibling diagnostics), `compact` (a round on a small vocabulary, for the rules to run on);
- the verifier comparison: `comparison` (typed requests and answers: a tree's exit law, every verifier's draws on
  it, sampled rounds, the rules over them, the result files read), `toy_rounds` (the toy target those rounds can
  be drawn at), `synthetic` (made-up rounds on a random toy target), `claims` (what the pages claim about laws and
  bounds, worded once with its scope);
- the workshop: `workshop` (its tree, walks, coupling and mixed node, each in a queue turn), `workshop_tables`
  (its hand-edited tables checked and turned into trees and rows), `coupling` (the coupling preset's p, q and
  laws), `lessons` (the lessons as data; their settings in `lesson_settings`) and `lesson_service` (a lesson's
  truth computed once per setting through the compute queue, a participant's progress as one typed object);
- ExitTrain: `training` (the door to run folders, data sets and the training recipe), `drafter_compare` (E per
  budget and the paired comparison, typed requests done in a queue turn), `training_state` (the page's one state
  object: its form, picks and results).

A public function whose first parameter is a `Seat` is a heavy service and takes a queue turn (a test enumerates
them). This package sits above `room` (it applies the room's caps and queue); the engine never imports it.
"""

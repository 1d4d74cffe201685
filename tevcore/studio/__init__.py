"""The app's page services: what a page asks for, checked once against the server's caps, and done in a queue turn.

A page collects input and renders; the work it asks for is done here, so no page can skip a cap or the compute
queue, and no page copies the math. `turns` (the `Seat` a request arrives with: the server's `Limits`, its compute
queue, the participant's key, and how the page hears back; every heavy service holds a queue turn through it),
`participants` (one key for all tabs of a browser: who a place in line and a space belong to), `page_states` (one typed state object per page and participant, so a page switch or a reload finds the
work), `reader` (the one
capped reader of every upload and file the app reads: the byte cap, and the text cap of a gzip's expanded size),
`traces` (trace files opened for replay), `comparison` (the verifier comparison's typed requests and answers: a
tree's exit law, every verifier's draws on it, sampled rounds, the rules over them, the result files read),
`toy_rounds` (the toy target those rounds can be drawn at), `synthetic` (made-up rounds on a random toy target: the
comparison's example tree and the tests'), `claims` (what the pages claim about laws and bounds, worded once with
its scope), `workshop` (the workshop's tree, walks, coupling and mixed node, each in a queue turn),
`workshop_tables` (its hand-edited tables checked and turned into trees and rows), `coupling` (the coupling
preset's p, q and laws), `lessons`
(the workshop's lessons as data: a setting, a question, a truth the package computes, an explanation; the
settings' trees and rows in `lesson_settings`) and `lesson_service` (a lesson's truth computed once per setting through the compute queue, a participant's progress
as one typed object), `training` (the ExitTrain page's door to run folders, data sets and the training recipe),
`drafter_compare` (the ExitTrain page's drafter comparisons: E per budget and the paired comparison, typed requests
done in a queue turn) and `training_state` (the ExitTrain page's one state object: its form, picks and results). A
public function whose first parameter is a `Seat` is a heavy service and takes a queue
turn (a test enumerates them). This package sits above `room` (it applies the room's caps and queue); the engine
never imports it.
"""

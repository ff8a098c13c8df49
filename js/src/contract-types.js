// @ts-check
// Generated from dtype_explorer/frontends/widget_contract.json by
// tools/contract_typedefs.py: do not edit (tests/frontends/test_contract.py checks it).

/**
 * What the page sends in the `request` trait (the kernel refuses any other key).
 * @typedef {object} WidgetRequest
 * @property {string} target a catalog name (Dense, ops.add) or a custom layer's name
 * @property {string} kwargs the constructor's keyword arguments as JSON text ({"units": 4}); '' for the catalog's
 * @property {string[]} input_dtypes one input dtype per input
 * @property {string} preset the value preset (one of presets)
 * @property {string} shape the input shapes as text: 2x8x3, (2, 8, 3) or JSON [2, 8, 3], one per input separated by commas (2x4, 2x4 or [[2, 4], [2, 4]]); '' for the catalog's
 * @property {string} policy the dtype policy (any name Keras accepts)
 * @property {string} mode how the target runs (one of modes; call when left out)
 * @property {string | null} engine null: the installed Keras; else one of engines ('keras==3.X.Y')
 * @property {string | null} precision null: the backend's settings as they are; else one of precisions (highest: TF32 off)
 * @property {string | null} quantize null: the float layer; else one of quantize_modes: the layer is quantized before the call as Model.quantize does (a layer's only: ops have no weights)
 * @property {string[]} backends the backends to probe on (of available_backends)
 * @property {number} nonce the page's number for this request; request_id echoes it
 */

/**
 * Every synced trait of the widget, as the page reads them.
 * @typedef {object} WidgetState
 * @property {Object<string, *>} catalog group -> target names (the catalog's groups, then 'custom')
 * @property {Object<string, *>} defaults target -> the kwargs, shapes and input dtypes a picker starts from
 * @property {Array<*>} dtypes every input dtype a picker offers
 * @property {Object<string, *>} dtype_families dtype name -> its family (float, int, uint, ...), from dtype_explorer.dtypes.FAMILIES
 * @property {Array<*>} policies the dtype policies offered (any name Keras accepts works too)
 * @property {Object<string, *>} presets value preset -> what its values are
 * @property {Array<*>} modes how a target can run: call, training, model, predict, fit, dataset
 * @property {Array<*>} precisions the float32 matmul precisions a request may name (records.PRECISIONS: highest, tf32, default)
 * @property {Array<*>} quantize_modes the quantization modes a request may name: the installed Keras's modes that need no calibration data (int8, int4, float8; gptq and awq need a dataset: dx.check_model)
 * @property {Array<*>} available_backends the installed backends a request may name
 * @property {Array<*>} engines the engines (which Keras answers) a request may name, the installed Keras first: [{engine: null | 'keras==3.X.Y' | 'tf_keras==2.X.Y', keras: its release, label, backends: null (every one) | ['tensorflow']}]; only created engines (dx.engines.create makes one)
 * @property {WidgetRequest} request the question the page asks (validated before use): an object of the 'request' keys below
 * @property {number} request_id the nonce of the request that results answer
 * @property {Object<string, *>} results backend -> ProbeResult.to_dict() (with its computed facts: outcome, shown_verdict, the verdict a badge shows: values-wrong where the dtype is as documented, or undocumented, but the values were found wrong), or {status: pending} until it answers
 * @property {Object<string, *>} timings backend -> milliseconds from submitting its probe to its answer
 * @property {string} verdict the verdict across the backends that answered, as a summary shows it (ProbeSet.shown_verdict: 'diverges', 'values-wrong', ...), or ''
 * @property {Object<string, *>} trace_divergence where the backends' op traces of the call first part (ProbeSet.first_divergence: op, steps by backend, outcomes), or {}
 * @property {Object<string, *>} comparison the answers side by side (records.Comparison, ProbeSet.comparison): columns [{label, backend, mode, status, headline}], rows [{key, group, label, cells: column -> {text, tone, dtype, note}, same}], differing (the labels of the rows that differ) and summary, a sentence; the page's compact view lays it out and compares nothing; {} before any answer
 * @property {Object<string, *>} promotion {tables: [...]}: the result_type tables behind the documented dtypes
 * @property {Object<string, *>} code the question as code (records.CodeCopy of the answers so far, ProbeSet.as_code): {dx: the dx.probe call, script: a raw-Keras script of it, fill_in: what to supply first, clipboard: both as one text}; the page's 'Copy as code' button copies clipboard (navigator.clipboard, else a text area to copy from); {} before any answer
 * @property {string} error why the last request from the page was refused, or ''
 * @property {Object<string, *>} audit the model view of an audit (DtypeExplorer(audit=report), %dtype_check --widget; frontends/_model_view.py): {summary, model, backend, keras, columns, rows: [LayerCall.row() + path, call, depth], findings: [{severity, kind, path, message, fix}], graph: ModelGraph.to_dict() (nodes: path, name, kind, layer_class, parent, compute_dtype, variable_dtype, calls, output_dtypes; edges: source, target, source_call, target_call, dtype, shape) or null, notes}; the page lays the graph out (dagre) and computes no dtype; {} when the explorer shows no audit
 */

export {};

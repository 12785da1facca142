"""Runs a .tflite file on ArmNN's CpuRef backend (Debian's python3-pyarmnn,
libarmnntfliteparser22, libarmnn-cpuref-backend22): the independent runtime the converted
CNN files are verified against (conytrain.audio.yamnet_armnn, conytrain.cnn.imagenet_armnn).
Needs those packages only when called (the CI tests read committed goldens)."""

import numpy as np


def run_tflite(tflite, inputs):
    """The model's output for each array of inputs (shaped as its input tensor), as
    float64, dequantised with the output tensor's scale and offset when it is quantised."""
    import pyarmnn as ann
    parser = ann.ITfLiteParser()
    network = parser.CreateNetworkFromBinaryFile(tflite)
    (name_in,), (name_out,) = (parser.GetSubgraphInputTensorNames(0),
                               parser.GetSubgraphOutputTensorNames(0))
    bind_in = parser.GetNetworkInputBindingInfo(0, name_in)
    bind_out = parser.GetNetworkOutputBindingInfo(0, name_out)
    info = bind_out[1]
    quantised = info.IsQuantized()
    runtime = ann.IRuntime(ann.CreationOptions())
    opt, _ = ann.Optimize(network, [ann.BackendId("CpuRef")], runtime.GetDeviceSpec(),
                          ann.OptimizerOptions())
    net_id, _ = runtime.LoadNetwork(opt)
    rows = []
    for x in inputs:
        in_tensors = ann.make_input_tensors([bind_in], [x])
        out_tensors = ann.make_output_tensors([bind_out])
        runtime.EnqueueWorkload(net_id, in_tensors, out_tensors)
        y = ann.workload_tensors_to_ndarray(out_tensors)[0].reshape(-1).astype(np.float64)
        if quantised:
            y = (y - info.GetQuantizationOffset()) * info.GetQuantizationScale()
        rows.append(y)
    return rows

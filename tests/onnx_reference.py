"""onnxruntime as the reference the ONNX tests compare graphc with."""
import onnxruntime as ort


def onnxruntime_run(model, feeds):
    """``model``'s outputs on ``feeds`` by onnxruntime's CPU provider (2 threads, quiet)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)

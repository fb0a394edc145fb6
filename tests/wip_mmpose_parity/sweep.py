import sys, glob, collections, re
sys.path.insert(0, '/work/wip-mmpose')
from mmengine.config import Config
import mmfix._configs as c
root = '/tmp/family0x/mmpose/mmpose/.mim/configs'
files = sorted(f for f in glob.glob(root + '/**/*.py', recursive=True) if '/_base_/' not in f)
ok, why = 0, collections.Counter()
print(len(files), flush=True)
for f in files:
    try:
        cfg = Config.fromfile(f).to_dict()
        c.convert(cfg, 'mmpose')
        ok += 1
    except BaseException as e:
        msg = str(e)
        m = re.search(r"(the [^;]*?) is not converted yet", msg)
        why[m.group(1) if m else type(e).__name__ + ': ' + msg[:90]] += 1
print(len(files), 'converted', ok)
for k, v in why.most_common(25):
    print(v, k)

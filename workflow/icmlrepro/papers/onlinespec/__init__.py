"""OnlineSPEC: speculative decoding whose draft models learn online from verification feedback.

``verify`` holds exact verification (Triton kernel + torch reference), ``speculative`` the decoding
loop, ``acceptance`` the teacher-forced acceptance of a greedy draft, ``learners`` the online arms
(offline, OGD, OSD, optimistic, ensemble), ``draft`` (OnlineSPEC's own offline draft, trained on some task families only)/``stream``/``online``/
``evaluate``/``figures`` the stages.
"""

; Reverse a tower of three blocks: c on b on a  ->  a on b on c.
(define (problem reverse-three)
  (:domain blocks)
  (:objects a b c - block)
  (:init (ontable a) (on b a) (on c b) (clear c) (handempty))
  (:goal (and (on a b) (on b c))))
